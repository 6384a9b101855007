"""`builder xla-check`: run a user's training script in the smoke image and turn
torch_xla's metrics and PT_XLA_DEBUG_LEVEL=2 analysis into a short list of findings.

torch_xla says a lot (``PT_XLA_DEBUG_LEVEL=2`` prints a "Compilation Analysis" and an
"Execution Analysis" block, with the cause and the Python frames, for every compile and
every execution) but sums up nothing. Here each finding has a file:line, a count and a
one-line hint:

- ``recompilation``: one line triggers compiles of several different graphs (shapes
  change between steps: dynamic shapes);
- ``host-sync``: a device tensor read on the host in the loop (``.item()``, printing,
  ``float()``, ``.cpu()`` ...): each read cuts the graph and waits for the device;
- ``cpu-fallback``: an ``aten::`` counter (an op with no XLA lowering ran on the CPU),
  placed at the line whose execution was forced to read a value for it;
- ``no-sync``: ops traced again and again with no ``torch_xla.sync()``/``mark_step``
  and no MpDeviceLoader: the whole loop became one graph;
- ``no-mpdeviceloader``: batches moved with ``.to(device)`` at one line, step after step.

How: the script runs under a small runner (``python -c RUNNER script args``) that wraps
``torch.Tensor``'s host reads and host-to-device ``.to`` to note the user's file:line,
then, at exit, prints the metrics (every metric's samples, every counter) and those
notes as JSON on one marker line. The analysis blocks come from torch_xla itself. The
parsers below were written against real torch_xla 2.9.0 output (kept as test data in
``tests/data/xla_check/``). A finding is a heuristic with a threshold: one read after
the loop is fine; the same line reading on every step is not.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

MARKER = "@@builder-xla-check@@"
CONTAINER_ROOT = "/xla-check/src"
RECOMPILE_MIN = 3  # distinct graphs compiled at one line (a second one after warm-up is common)
REPEAT_MIN = 2  # the same line doing the same thing twice: it is in the loop
KIND_ORDER = ("recompilation", "host-sync", "cpu-fallback", "no-sync", "no-mpdeviceloader")

# Runs inside the container as `python -c RUNNER SCRIPT ARGS...`.
RUNNER = r'''
import atexit, json, os, runpy, sys, threading
script = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
root = os.path.dirname(script) + os.sep
sys.path.insert(0, os.path.dirname(script))
import torch
import torch_xla
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl

reads, transfers, loaders = {}, {}, {"count": 0}
guard = threading.local()

def user_site(depth=60):
    frame = sys._getframe(3)  # user_site <- note <- the wrapper <- its caller
    for _ in range(depth):
        if frame is None:
            return None
        if frame.f_code.co_filename.startswith(root):
            return "%s:%d" % (frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None

def note(table, kind, depth=60):
    site = user_site(depth)
    if site:
        kinds = table.setdefault(site, {})
        kinds[kind] = kinds.get(kind, 0) + 1

def is_xla(tensor):
    try:
        return tensor.device.type == "xla"
    except Exception:
        return False

def wrap_read(name, kind):
    original = getattr(torch.Tensor, name)
    def method(self, *args, **kwargs):
        if getattr(guard, "busy", False) or not is_xla(self):
            return original(self, *args, **kwargs)
        guard.busy = True
        try:
            note(reads, kind)
            return original(self, *args, **kwargs)
        finally:
            guard.busy = False
    setattr(torch.Tensor, name, method)

for name, kind in (("item", ".item()"), ("tolist", ".tolist()"), ("numpy", ".numpy()"), ("cpu", ".cpu()"),
                   ("__repr__", "printing a tensor"), ("__format__", "formatting a tensor"),
                   ("__bool__", "a tensor as a condition"), ("__float__", "float(tensor)"),
                   ("__int__", "int(tensor)")):
    wrap_read(name, kind)

original_to = torch.Tensor.to
def to(self, *args, **kwargs):
    out = original_to(self, *args, **kwargs)
    if not getattr(guard, "busy", False):
        try:
            if self.device.type == "cpu" and out.device.type == "xla":
                note(transfers, ".to(device)", depth=1)  # called by the user's code itself, not Module.to
            elif self.device.type == "xla" and out.device.type == "cpu":
                note(reads, ".to('cpu')")
        except Exception:
            pass
    return out
torch.Tensor.to = to

for cls in (getattr(pl, "ParallelLoader", None), getattr(pl, "MpDeviceLoader", None)):
    if cls is not None:
        init = cls.__init__
        def counted(self, *args, __init=init, **kwargs):
            loaders["count"] += 1
            return __init(self, *args, **kwargs)
        cls.__init__ = counted

def dump():
    data = {"metrics": {}, "counters": {}, "reads": reads, "transfers": transfers, "loaders": loaders["count"]}
    try:
        for name in met.metric_names():
            values = met.metric_data(name)
            if values:
                data["metrics"][name] = {"samples": int(values[0]), "accumulator": float(values[1])}
        data["counters"] = {name: int(met.counter_value(name) or 0) for name in met.counter_names()}
    except Exception as exc:
        data["error"] = repr(exc)
    sys.__stdout__.write("@@builder-xla-check@@" + json.dumps(data) + "\n")
    sys.__stdout__.flush()

atexit.register(dump)  # after torch_xla's own handlers: runs before them
runpy.run_path(script, run_name="__main__")
'''


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    line: int

    @property
    def site(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Block:
    """One "Compilation Analysis" or "Execution Analysis" block of PT_XLA_DEBUG_LEVEL=2."""

    kind: str  # compilation | execution
    cause: str = ""
    graph_hash: str = ""
    inputs: int = 0
    outputs: int = 0
    frames: list[Frame] = field(default_factory=list)


@dataclass
class Finding:
    kind: str
    location: str  # file:line, '' when unknown
    count: int
    hint: str
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Report:
    findings: list[Finding]
    figures: dict[str, Any]
    exit_code: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "figures": self.figures,
                "findings": [f.as_dict() for f in self.findings]}


# -------------------------------------------------------------------------- parsing
_PREFIX = re.compile(r"^(Post Compilation|Compilation|Execution) Analysis: ?(.*)$")
_FRAME = re.compile(r"^(.*?) \((.*):(\d+)\)$")


def parse_blocks(text: str) -> list[Block]:
    """The analysis blocks in captured output (other lines, e.g. the script's, ignored)."""
    blocks: list[Block] = []
    current: Block | None = None
    section = ""
    for raw in text.splitlines():
        match = _PREFIX.match(raw.rstrip())
        if not match or match.group(1) == "Post Compilation":
            continue
        kind, body = match.group(1).lower(), match.group(2).strip()
        if body.startswith("====="):
            current, section = None, ""
            continue
        if body in ("Compilation Cause", "Execution Cause"):
            current, section = Block(kind), "cause"
            blocks.append(current)
            continue
        if current is None or body.startswith("-----"):
            section = "" if current is None else "done"
            continue
        if body == "Graph Info:":
            section = "graph"
        elif body == "Python Frame Triggered Execution:":
            section = "frames"
        elif section == "cause":
            current.cause = f"{current.cause} {body}".strip()
        elif section == "graph":
            key, _, value = body.partition(":")
            value = value.strip()
            if key == "Graph Hash":
                current.graph_hash = value
            elif key == "Number of Graph Inputs" and value.isdigit():
                current.inputs = int(value)
            elif key == "Number of Graph Outputs" and value.isdigit():
                current.outputs = int(value)
        elif section == "frames":
            frame = _FRAME.match(body)
            if frame:
                current.frames.append(Frame(frame.group(1), frame.group(2), int(frame.group(3))))
    return blocks


def parse_dump(text: str) -> dict[str, Any] | None:
    """The runner's JSON from its marker line (the last one), or None."""
    found = None
    for line in text.splitlines():
        at = line.find(MARKER)
        if at >= 0:
            try:
                found = json.loads(line[at + len(MARKER):])
            except ValueError:
                continue
    return found


def user_frame(frames: list[Frame], root: str = CONTAINER_ROOT) -> Frame | None:
    """The innermost frame in the user's code (the blocks list the innermost first)."""
    prefix = root.rstrip("/") + "/"
    for frame in frames:
        if frame.file.startswith(prefix):
            return frame
    return None


def is_host_access(block: Block) -> bool:
    return "access tensor value" in block.cause


# --------------------------------------------------------------------------- findings
def _samples(dump: dict[str, Any], name: str) -> int:
    return int((dump.get("metrics") or {}).get(name, {}).get("samples", 0))


def figures(dump: dict[str, Any] | None, blocks: list[Block]) -> dict[str, Any]:
    dump = dump or {}
    counters = dump.get("counters") or {}
    return {
        "compiles": _samples(dump, "CompileTime"), "executions": _samples(dump, "ExecuteTime"),
        "transfers_from_device": _samples(dump, "TransferFromDeviceTime"),
        "transfers_to_device": _samples(dump, "TransferToDeviceTime"),
        "uncached_compiles": counters.get("UncachedCompile", 0), "cached_compiles": counters.get("CachedCompile", 0),
        "mark_steps": counters.get("MarkStep", 0), "loaders": dump.get("loaders", 0),
        "aten_counters": {k: v for k, v in sorted(counters.items()) if k.startswith("aten::")},
        "analysis_blocks": len(blocks), "metrics_read": bool(dump.get("metrics")),
    }


def analyse(dump: dict[str, Any] | None, blocks: list[Block], root: str = CONTAINER_ROOT) -> list[Finding]:
    """Findings from the runner's dump and the analysis blocks (sites are container paths)."""
    dump = dump or {}
    counters: dict[str, int] = dump.get("counters") or {}
    reads: dict[str, dict[str, int]] = dump.get("reads") or {}
    transfers: dict[str, dict[str, int]] = dump.get("transfers") or {}
    found: list[Finding] = []

    graphs_at: dict[str, set[str]] = {}
    compiles_at: Counter[str] = Counter()
    access_at: Counter[str] = Counter()
    first_execution = ""
    for block in blocks:
        frame = user_frame(block.frames, root)
        site = frame.site if frame else ""
        if block.kind == "compilation":
            compiles_at[site] += 1
            graphs_at.setdefault(site, set()).add(block.graph_hash)
        else:
            first_execution = first_execution or site
            if is_host_access(block) and site:
                access_at[site] += 1

    # Recompilation: one line compiling many different graphs.
    for site, graphs in sorted(graphs_at.items()):
        if len(graphs) >= RECOMPILE_MIN:
            found.append(Finding("recompilation", site, compiles_at[site],
                                 f"{len(graphs)} different graphs compiled here: tensor shapes change between "
                                 "steps (dynamic shapes); pad or bucket inputs to fixed sizes (e.g. drop_last=True)"))
    uncached = int(counters.get("UncachedCompile", 0))
    if not blocks and uncached >= RECOMPILE_MIN:
        found.append(Finding("recompilation", "", uncached, f"{uncached} graphs compiled (no analysis output "
                             "to place them): shapes likely change between steps"))

    # Host syncs the runner saw, at the user's line.
    transfers_out = _samples(dump, "TransferFromDeviceTime")
    for site, kinds in sorted(reads.items()):
        count = sum(kinds.values())
        if count >= REPEAT_MIN:
            how = ", ".join(sorted(kinds))
            found.append(Finding("host-sync", site, count,
                                 f"host read of a device tensor ({how}) on every step: it cuts the graph and stalls "
                                 "the device; keep values on device, read them every N steps or in "
                                 "xm.add_step_closure", detail=f"TransferFromDeviceTime {transfers_out} samples"))

    # CPU fallbacks: every aten:: counter but the scalar read; placed at the line whose
    # execution was forced to read a value and that no host read explains.
    unexplained = Counter({site: n for site, n in access_at.items() if site not in reads})
    fallbacks = {op: n for op, n in sorted(counters.items())
                 if op.startswith("aten::") and op != "aten::_local_scalar_dense"}
    for op, count in fallbacks.items():
        site = max(unexplained, key=lambda s: (unexplained[s] == count, unexplained[s]), default="")
        found.append(Finding("cpu-fallback", site, int(count),
                             f"{op} has no XLA lowering: it ran on the CPU {count} time(s), with device<->host "
                             "copies around it; use an op XLA lowers or move it out of the step", detail=op))
    if not fallbacks:
        for site, count in sorted(unexplained.items()):
            if count >= REPEAT_MIN:
                found.append(Finding("host-sync", site, count,
                                     "the graph is cut here every step to read a tensor value on the host; keep the "
                                     "value on device or read it outside the loop",
                                     detail=f"TransferFromDeviceTime {transfers_out} samples"))
    scalar_reads = int(counters.get("aten::_local_scalar_dense", 0))
    if scalar_reads >= REPEAT_MIN and not any(f.kind in ("host-sync", "cpu-fallback") for f in found):
        found.append(Finding("host-sync", "", scalar_reads, "aten::_local_scalar_dense: tensor values were read "
                             "on the host (.item(), float(), a tensor in an `if`) in the loop",
                             detail=f"TransferFromDeviceTime {transfers_out} samples"))

    # A loop with no sync barrier: ops traced again and again, never cut into steps.
    traced = max((v for k, v in counters.items() if k.startswith("xla::")), default=0)
    if dump.get("metrics") and not counters.get("MarkStep") and traced >= 3 and _samples(dump, "ExecuteTime"):
        in_loop = max(transfers, key=lambda s: sum(transfers[s].values()), default="")
        found.append(Finding("no-sync", in_loop or first_execution, _samples(dump, "ExecuteTime"),
                             f"no torch_xla.sync()/xm.mark_step() and no MpDeviceLoader: ops traced up to {traced} "
                             "times went into one growing graph, run only when a value was read; call "
                             "torch_xla.sync() at the end of each step",
                             detail=f"graph executed at {first_execution}" if first_execution else ""))

    # Input data copied by hand, step after step, instead of through MpDeviceLoader.
    for site, kinds in sorted(transfers.items()):
        count = sum(kinds.values())
        if count >= REPEAT_MIN:
            found.append(Finding("no-mpdeviceloader", site, count,
                                 ".to(device) on CPU batches in the loop: each copy blocks the step; iterate over "
                                 "torch_xla.distributed.parallel_loader.MpDeviceLoader(loader, device) instead, "
                                 "which overlaps the copies with compute"))
    return sorted(found, key=lambda f: (KIND_ORDER.index(f.kind), f.location))


def host_site(site: str, host_dir: str, root: str = CONTAINER_ROOT) -> str:
    """A container site (``/xla-check/src/train.py:20``) as the user's path (``dir/train.py:20``)."""
    prefix = root.rstrip("/") + "/"
    if site.startswith(prefix):
        return str(PurePosixPath(host_dir) / site[len(prefix):])
    return site


def check_output(text: str, host_dir: str, exit_code: int = 0, root: str = CONTAINER_ROOT) -> Report:
    """Everything the run printed -> the report, with sites mapped to the user's paths."""
    dump = parse_dump(text)
    blocks = parse_blocks(text)
    found = analyse(dump, blocks, root)
    for finding in found:
        finding.location = host_site(finding.location, host_dir, root)
        finding.detail = finding.detail.replace(root.rstrip("/") + "/", host_dir.rstrip("/") + "/")
    return Report(found, figures(dump, blocks), exit_code)


def is_noise(line: str) -> bool:
    """Lines shown only in the log, not live: the analysis wall and the marker."""
    return bool(_PREFIX.match(line)) or line.startswith("Computation hash:") or MARKER in line
