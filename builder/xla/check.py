"""`builder xla-check`: run a user's training script in the smoke image and turn
torch_xla's metrics and PT_XLA_DEBUG_LEVEL=2 analysis into a short list of findings.

torch_xla says a lot (``PT_XLA_DEBUG_LEVEL=2`` prints a "Compilation Analysis" and an
"Execution Analysis" block, with the cause and the Python frames, for every compile and
every execution) but sums up nothing. Here each finding has a file:line, a count, how
often it happened against the steps the script ran, a severity (builder.xla.frequency:
error on most steps, warning when periodic, info when one-off) and a hint:

- ``recompilation``: one line triggers compiles of several different graphs (shapes
  change between steps: dynamic shapes);
- ``host-sync``: a device tensor read on the host in the loop (``.item()``, printing,
  ``float()``, ``.cpu()`` ...): each read cuts the graph and waits for the device;
- ``cpu-fallback``: an ``aten::`` counter (an op with no XLA lowering ran on the CPU),
  placed at the line whose execution was forced to read a value for it;
- ``no-sync``: ops traced again and again with no ``torch_xla.sync()``/``mark_step``
  and no MpDeviceLoader: the whole loop became one graph;
- ``no-mpdeviceloader``: batches moved with ``.to(device)`` at one line, step after step.

How: the script runs under a small runner (builder.xla.runner) that notes host reads
(with their step) and host-to-device ``.to`` at the user's file:line, counts the steps,
and at exit prints the metrics and those notes as JSON on one marker line. The analysis
blocks come from torch_xla itself. The parsers below were written against real torch_xla
2.9.0 output (kept as test data in ``tests/data/xla_check/``). One read after the loop
is an ``info``; a read every 4th step a ``warning``; the same line reading on every step
an ``error``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

from builder.recipes.base import marked_json
from builder.xla.frequency import ERROR, INFO, REPEAT_MIN, WARNING, Frequency, at_least, of_count, of_events, steps_of
from builder.xla.runner import MARKER

CONTAINER_ROOT = "/xla-check/src"
RECOMPILE_MIN = 3  # distinct graphs compiled at one line (a second one after warm-up is common)
KIND_ORDER = ("recompilation", "host-sync", "cpu-fallback", "no-sync", "no-mpdeviceloader")

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
    steps: int  # steps the script ran (0: no step boundary)
    frequency: float | None  # count / steps (None without steps)
    severity: str  # error | warning | info (builder.xla.frequency)
    summary: str  # what was measured: "3 host reads in 12 steps, every 4th step"
    hint: str  # why it costs and what to do, given what the script already does
    detail: str = ""

    @classmethod
    def measured(cls, kind: str, location: str, freq: Frequency, noun: str, hint: str, detail: str = "",
                 severity: str | None = None, plural: str = "") -> Finding:
        return cls(kind, location, freq.count, freq.steps, freq.per_step, severity or freq.severity,
                   freq.describe(noun, plural), hint, detail)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CheckReport:
    findings: list[Finding]
    figures: dict[str, Any]
    exit_code: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "figures": self.figures,
                "findings": [f.as_dict() for f in self.findings]}

    def failing(self, level: str) -> list[Finding]:
        """The findings a gate at ``level`` (error | warning | info) fails on."""
        return [f for f in self.findings if at_least(f.severity, level)]


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
    return marked_json(text, MARKER)


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


def executions(dump: dict[str, Any]) -> int:
    """Graph executions the script started. torch_xla counts ``ExecuteComputation`` when it
    schedules one (xla_graph_executor.cpp), but records an ``ExecuteTime`` sample only when
    PJRT's future for it is ready, from a callback on another thread
    (pjrt_computation_client.cpp, ``returned_future->OnReady``): a dump taken at exit can
    miss the last sample. The counter is the deterministic figure; samples are the fallback
    for a dump without it."""
    counters = dump.get("counters") or {}
    return max(int(counters.get("ExecuteComputation", 0)), _samples(dump, "ExecuteTime"))


def figures(dump: dict[str, Any] | None, blocks: list[Block]) -> dict[str, Any]:
    dump = dump or {}
    counters = dump.get("counters") or {}
    return {
        "compiles": _samples(dump, "CompileTime"), "executions": executions(dump),
        "transfers_from_device": _samples(dump, "TransferFromDeviceTime"),
        "transfers_to_device": _samples(dump, "TransferToDeviceTime"),
        "uncached_compiles": counters.get("UncachedCompile", 0), "cached_compiles": counters.get("CachedCompile", 0),
        "mark_steps": counters.get("MarkStep", 0), "loaders": dump.get("loaders", 0),
        "aten_counters": {k: v for k, v in sorted(counters.items()) if k.startswith("aten::")},
        "analysis_blocks": len(blocks), "metrics_read": bool(dump.get("metrics")),
        "steps": steps_of(dump).count, "step_clock": steps_of(dump).clock,
    }


_READ_HINTS = {
    ERROR: "each read cuts the graph and stalls the device; keep values on device (e.g. total += loss.detach()) "
           "and read them every N steps, or in xm.add_step_closure",
    WARNING: "already periodic, but each read still stalls the device; consider xm.add_step_closure to read "
             "without stalling",
    INFO: "a one-off read: nothing to change",
}


def _read_sites(dump: dict[str, Any]) -> dict[str, tuple[dict[str, int], list[list[int]]]]:
    """Per user line: the kinds of host read and when each happened ([syncs, batches] so far)."""
    sites = {}
    for site, entry in (dump.get("reads") or {}).items():
        if "kinds" in entry:
            sites[site] = (entry["kinds"], entry.get("at") or [])
        else:  # a dump without the step clock: counts only
            sites[site] = (entry, [])
    return sites


def analyse(dump: dict[str, Any] | None, blocks: list[Block], root: str = CONTAINER_ROOT) -> list[Finding]:
    """Findings from the runner's dump and the analysis blocks (sites are container paths)."""
    dump = dump or {}
    counters: dict[str, int] = dump.get("counters") or {}
    reads = _read_sites(dump)
    transfers: dict[str, dict[str, int]] = dump.get("transfers") or {}
    steps = steps_of(dump)
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
    shapes_hint = ("tensor shapes change between steps (dynamic shapes); pad or bucket inputs to fixed sizes "
                   "(e.g. drop_last=True)")
    for site, graphs in sorted(graphs_at.items()):
        if len(graphs) >= RECOMPILE_MIN:
            found.append(Finding.measured("recompilation", site, of_count(compiles_at[site], steps), "compile",
                                          f"{len(graphs)} different graphs compiled here: {shapes_hint}"))
    uncached = int(counters.get("UncachedCompile", 0))
    if not blocks and uncached >= RECOMPILE_MIN:
        found.append(Finding.measured("recompilation", "", of_count(uncached, steps), "compile",
                                      f"no analysis output to place them: {shapes_hint}"))

    # Host reads the runner saw, at the user's line, each with its step.
    transfers_out = f"TransferFromDeviceTime {_samples(dump, 'TransferFromDeviceTime')} samples"
    for site, (kinds, at) in sorted(reads.items()):
        count = sum(kinds.values())
        freq = of_events([steps.index(a) for a in at], steps) if len(at) == count else of_count(count, steps)
        if freq.severity == INFO and count >= REPEAT_MIN and not at:
            continue  # counts only and no steps to judge them by
        how = ", ".join(sorted(kinds))
        found.append(Finding.measured("host-sync", site, freq, "host read",
                                      f"host read of a device tensor ({how}): {_READ_HINTS[freq.severity]}",
                                      detail=transfers_out))

    # CPU fallbacks: every aten:: counter but the scalar read; placed at the line whose
    # execution was forced to read a value and that no host read explains.
    unexplained = Counter({site: n for site, n in access_at.items() if site not in reads})
    fallbacks = {op: n for op, n in sorted(counters.items())
                 if op.startswith("aten::") and op != "aten::_local_scalar_dense"}
    for op, count in fallbacks.items():
        site = max(unexplained, key=lambda s: (unexplained[s] == count, unexplained[s]), default="")
        found.append(Finding.measured("cpu-fallback", site, of_count(count, steps), "run on the CPU",
                                      f"{op} has no XLA lowering: each run has device<->host copies around it; "
                                      "use an op XLA lowers or move it out of the step", detail=op,
                                      plural="runs on the CPU"))
    if not fallbacks:
        for site, count in sorted(unexplained.items()):
            if count >= REPEAT_MIN:
                found.append(Finding.measured("host-sync", site, of_count(count, steps), "graph cut",
                                              "the graph is cut here to read a tensor value on the host; keep the "
                                              "value on device or read it outside the loop", detail=transfers_out))
    scalar_reads = int(counters.get("aten::_local_scalar_dense", 0))
    if scalar_reads >= REPEAT_MIN and not any(f.kind in ("host-sync", "cpu-fallback") for f in found):
        found.append(Finding.measured("host-sync", "", of_count(scalar_reads, steps), "host read",
                                      "aten::_local_scalar_dense: tensor values were read on the host (.item(), "
                                      "float(), a tensor in an `if`)", detail=transfers_out))

    # A loop with no sync barrier: ops traced again and again, never cut into steps.
    traced = max((v for k, v in counters.items() if k.startswith("xla::")), default=0)
    if dump.get("metrics") and not counters.get("MarkStep") and traced >= 3 and executions(dump):
        in_loop = max(transfers, key=lambda s: sum(transfers[s].values()), default="")
        found.append(Finding.measured(
            "no-sync", in_loop or first_execution, of_count(executions(dump), steps),
            "graph execution", f"no torch_xla.sync()/xm.mark_step() and no MpDeviceLoader: ops traced up to "
            f"{traced} times went into one growing graph, run only when a value was read; call torch_xla.sync() "
            "at the end of each step", detail=f"graph executed at {first_execution}" if first_execution else "",
            severity=ERROR))

    # Input data copied by hand, step after step, instead of through MpDeviceLoader: it costs
    # the copy time of each step, not a graph cut or a stall, so at most a warning.
    for site, kinds in sorted(transfers.items()):
        count = sum(kinds.values())
        if count >= REPEAT_MIN:
            freq = of_count(count, steps)
            found.append(Finding.measured(
                "no-mpdeviceloader", site, freq, "host-to-device copy",
                ".to(device) on CPU batches in the loop: each copy blocks the step; iterate over "
                "torch_xla.distributed.parallel_loader.MpDeviceLoader(loader, device) instead, which overlaps "
                "the copies with compute", severity=WARNING if freq.severity == ERROR else freq.severity,
                plural="host-to-device copies"))
    return sorted(found, key=lambda f: (KIND_ORDER.index(f.kind), f.location))


def host_site(site: str, host_dir: str, root: str = CONTAINER_ROOT) -> str:
    """A container site (``/xla-check/src/train.py:20``) as the user's path (``dir/train.py:20``)."""
    prefix = root.rstrip("/") + "/"
    if site.startswith(prefix):
        return str(PurePosixPath(host_dir) / site[len(prefix):])
    return site


def check_output(text: str, host_dir: str, exit_code: int = 0, root: str = CONTAINER_ROOT) -> CheckReport:
    """Everything the run printed -> the report, with sites mapped to the user's paths."""
    dump = parse_dump(text)
    blocks = parse_blocks(text)
    found = analyse(dump, blocks, root)
    for finding in found:
        finding.location = host_site(finding.location, host_dir, root)
        finding.detail = finding.detail.replace(root.rstrip("/") + "/", host_dir.rstrip("/") + "/")
    return CheckReport(found, figures(dump, blocks), exit_code)


def is_noise(line: str) -> bool:
    """Lines shown only in the log, not live: the analysis wall and the marker."""
    return bool(_PREFIX.match(line)) or line.startswith("Computation hash:") or MARKER in line
