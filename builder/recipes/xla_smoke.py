"""The real PyTorch/XLA smoke check: does the torch_xla wheel execute *lazily*?

Importing torch_xla proves little: a wheel built against the wrong torch, or one whose
lowerings are broken, imports fine and then recompiles every step or runs ops on the
CPU. So the check trains a tiny model (Linear(8, 2), SGD) for ``STEPS`` steps on the
CPU PJRT backend, feeding batches through ``MpDeviceLoader`` with a sync barrier each
step, and reads ``torch_xla.debug.metrics``. It passes only when

- the step graph compiled once (CompileTime 1 sample; UncachedCompile 1, CachedCompile
  STEPS - 1) and executed once per step (ExecuteComputation STEPS),
- nothing was copied device -> host in the loop (no TransferFromDeviceTime samples),
- no op fell back to the CPU (no ``aten::`` counter).

Where it runs: the wheels and their dependencies are installed from the local index
alone (mounted read-only, no network, pip's machine config off) into a container from
the python stage, which is committed as ``builder/smoke:<key>`` (the installed layer of
builder.stages.installed: key of the python stage image ID, the wheels' sha256 and the
install script) so the several-GB install happens once per key; later
smoke runs and ``builder xla-check`` start from that image with ``--network none``.
The program prints its figures as JSON on one marker line, which the host parses.
"""

from __future__ import annotations

import hashlib
import json
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from builder.engine import ContainerSpec, Engine
from builder.errors import BuildError
from builder.files import atomic_write
from builder.index.directory import DirectoryIndex
from builder.index.wheelmeta import parse_filename
from builder.recipes.base import marked_json
from builder.stages.installed import ensure_installed, layer_tag

STEPS = 6
SMOKE_REPOSITORY = "builder/smoke"
MARKER = "@@builder-xla-smoke@@"
# What makes a torch_xla wheel the real thing rather than a fixture shaped like it.
REAL_XLA_FILES = ("torch_xla/debug/metrics.py", "torch_xla/distributed/parallel_loader.py")

# Runs inside the container: `python -c PROGRAM STEPS`. Only the standard library,
# torch and torch_xla; whichever sync API the installed version offers.
PROGRAM = r'''
import json, sys, time
started = time.monotonic()
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla.distributed.parallel_loader import MpDeviceLoader

steps = int(sys.argv[1])
device = torch_xla.device() if hasattr(torch_xla, "device") else xm.xla_device()
sync = getattr(torch_xla, "sync", None) or xm.mark_step
imported = time.monotonic() - started
torch.manual_seed(0)
model = torch.nn.Linear(8, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.MSELoss()
batches = [(torch.randn(4, 8), torch.randn(4, 2)) for _ in range(steps)]
sync()  # the parameters' transfer is not part of the loop
met.clear_all()
loop_started = time.monotonic()
done = 0
for x, y in MpDeviceLoader(batches, device):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    sync()
    done += 1
loop = time.monotonic() - loop_started

def samples(name):
    data = met.metric_data(name)
    return int(data[0]) if data else 0

counters = {name: int(met.counter_value(name) or 0) for name in met.counter_names()}
figures = {
    "torch": torch.__version__, "torch_xla": torch_xla.__version__,
    "sync_api": "torch_xla.sync" if hasattr(torch_xla, "sync") else "xm.mark_step",
    "steps": done, "compiles": samples("CompileTime"),
    # ExecuteComputation is counted when an execution is scheduled; ExecuteTime's sample
    # only lands when PJRT's future is ready, on another thread (can be one short here)
    "executions": max(counters.get("ExecuteComputation", 0), samples("ExecuteTime")),
    "transfers_from_device": samples("TransferFromDeviceTime"),
    "transfers_to_device": samples("TransferToDeviceTime"),
    "uncached_compiles": counters.get("UncachedCompile", 0), "cached_compiles": counters.get("CachedCompile", 0),
    "fallbacks": {k: v for k, v in sorted(counters.items()) if k.startswith("aten::")},
    "import_seconds": round(imported, 3), "loop_seconds": round(loop, 3),
}
figures["final_loss"] = float(loss.detach().cpu())  # read after the figures: a host transfer
print("@@builder-xla-smoke@@" + json.dumps(figures), flush=True)
'''


@dataclass
class SmokeFigures:
    """What the smoke program measured (names follow torch_xla.debug.metrics)."""

    torch: str = ""
    torch_xla: str = ""
    sync_api: str = ""
    steps: int = 0
    compiles: int = 0  # CompileTime samples
    executions: int = 0  # ExecuteComputation counter (ExecuteTime samples can lag: see PROGRAM)
    transfers_from_device: int = 0  # TransferFromDeviceTime samples
    transfers_to_device: int = 0
    uncached_compiles: int = 0
    cached_compiles: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)  # aten:: counters
    import_seconds: float = 0.0
    loop_seconds: float = 0.0
    final_loss: float = 0.0

    def summary(self) -> str:
        return (f"{self.compiles} compile(s), {self.executions} execution(s) in {self.steps} steps, "
                f"{self.transfers_from_device} device->host transfer(s), {len(self.fallbacks)} CPU fallback(s)")


@dataclass
class SmokeResult:
    status: str  # passed | reused | failed
    key: str
    image: str
    figures: SmokeFigures
    problems: list[str] = field(default_factory=list)
    image_reused: bool = True
    image_seconds: float = 0.0  # installing the wheels + committing the image (0 when reused)
    run_seconds: float = 0.0
    log_path: str = ""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["summary"] = self.figures.summary()
        return data


# ------------------------------------------------------------------------ pure parts
def parse_figures(output: str) -> SmokeFigures | None:
    """The figures from the program's marker line (the last one wins), or None."""
    data = marked_json(output, MARKER)
    if data is None:
        return None
    return SmokeFigures(**{k: v for k, v in data.items() if k in SmokeFigures.__dataclass_fields__})


def verdict(figures: SmokeFigures, steps: int = STEPS) -> list[str]:
    """Why the run is not lazy execution as it should be; empty when it passes."""
    problems = []
    if figures.steps != steps:
        problems.append(f"the loop ran {figures.steps} steps, expected {steps}")
    if figures.compiles != 1 or figures.uncached_compiles != 1:
        problems.append(f"the step graph compiled {figures.compiles} times (UncachedCompile "
                        f"{figures.uncached_compiles}), expected once: the graph changes between steps")
    if figures.cached_compiles != steps - 1:
        problems.append(f"CachedCompile is {figures.cached_compiles}, expected {steps - 1}: "
                        "steps were not served from the compilation cache")
    if figures.executions != steps:
        problems.append(f"{figures.executions} graph executions for {steps} steps, expected one per step")
    if figures.transfers_from_device:
        problems.append(f"{figures.transfers_from_device} device->host transfer(s) in the loop, expected none")
    if figures.fallbacks:
        ops = ", ".join(f"{k} x{v}" for k, v in figures.fallbacks.items())
        problems.append(f"CPU fallbacks: {ops}")
    return problems


def result_key(image: str, steps: int = STEPS) -> str:
    """The smoke result's key: the image plus the program that measured it."""
    return hashlib.sha256(json.dumps([image, PROGRAM, steps]).encode()).hexdigest()[:32]


def is_real_torch_xla(wheel: Path) -> bool:
    """A wheel of project torch_xla that ships the modules the lazy-execution check uses."""
    try:
        if parse_filename(wheel.name).normalized != "torch-xla":
            return False
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
    except Exception:  # noqa: BLE001 - unreadable or misnamed: simply not a real torch_xla
        return False
    return all(name in names for name in REAL_XLA_FILES)


def real_xla_wheels(index: DirectoryIndex, wheels: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (filename, sha256) of every wheel of the run when one of them is a real torch_xla
    (then the lazy-execution check applies), else []."""
    if any(is_real_torch_xla(index.files_dir / name) for name, _ in wheels):
        return list(wheels)
    return []


# ------------------------------------------------------------------------- Docker parts
def ensure_image(engine: Engine, index: DirectoryIndex, python_tag: str, python_image_id: str,
                 wheels: list[tuple[str, str]], log_dir: Path, note=None) -> tuple[str, bool, float]:
    """``builder/smoke:<key>``: the installed layer (builder.stages.installed) of ``wheels``
    ((filename, sha256), ...) and their dependencies over the python stage, under its own
    name (several GB: `docker images builder/smoke` shows them); built once per key.
    Returns (tag, reused, seconds)."""
    tag = layer_tag(python_image_id, wheels, SMOKE_REPOSITORY)
    if engine.image_id(tag) is not None:
        return tag, True, 0.0
    if note:
        note(f"smoke image {tag}: installing {', '.join(f for f, _ in wheels)} from the local "
             "index (once per key; several GB) ...")
    log_path = log_dir / f"smoke-image-{tag.rpartition(':')[2]}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        made = ensure_installed(engine, index.root, python_tag, python_image_id, wheels, log, SMOKE_REPOSITORY)
    return made.tag, made.reused, made.seconds


def run_program(engine: Engine, image: str, steps: int, log_path: Path) -> tuple[str, float, int]:
    spec = ContainerSpec(image=image, command=["python", "-c", PROGRAM, str(steps)], network="none",
                         environment={"PJRT_DEVICE": "CPU", "HOME": "/tmp/smoke-home", "PYTHONUNBUFFERED": "1"},
                         workdir="/tmp", labels={"builder.step": "xla-smoke"})
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        result = engine.run(spec, log)
    return result.output, result.seconds, result.exit_code


def smoke(engine: Engine, index: DirectoryIndex, python_tag: str, python_image_id: str,
          wheels: list[tuple[str, str]], data_dir: Path, logs_dir: Path, force: bool = False,
          steps: int = STEPS, note=None) -> SmokeResult:
    """Ensure the smoke image, then run the lazy-execution check unless this exact image
    and program passed before (``force`` runs it again). Raises BuildError on failure,
    with the figures in the message."""
    tag, image_reused, image_seconds = ensure_image(engine, index, python_tag, python_image_id, wheels,
                                                    logs_dir, note)
    key = result_key(tag, steps)
    record = data_dir / "smoke" / f"{key}.json"
    if record.is_file() and not force:
        try:
            data = json.loads(record.read_text())
            figures = SmokeFigures(**data["figures"])
            return SmokeResult("reused", key, tag, figures, image_reused=image_reused, image_seconds=image_seconds,
                               run_seconds=float(data.get("run_seconds", 0.0)), log_path=data.get("log_path", ""))
        except (ValueError, KeyError, TypeError):
            pass  # an unreadable record: measure again
    if note:
        note(f"xla smoke: {steps} steps of Linear(8, 2) through MpDeviceLoader on PJRT CPU in {tag} ...")
    log_path = logs_dir / f"xla-smoke-{key}.log"
    output, seconds, code = run_program(engine, tag, steps, log_path)
    figures = parse_figures(output)
    if figures is None:
        tail = "\n".join(output.strip().splitlines()[-8:])
        raise BuildError(f"the XLA smoke program failed (exit {code}) before reporting figures: {tail}",
                         f"see the log {log_path}")
    problems = verdict(figures, steps)
    result = SmokeResult("failed" if problems else "passed", key, tag, figures, problems, image_reused,
                         image_seconds, seconds, str(log_path))
    if problems:
        raise BuildError(f"XLA smoke check failed ({figures.summary()}): " + "; ".join(problems),
                         f"see the log {log_path}")
    atomic_write(record, json.dumps({**result.as_dict(), "wheels": [f for f, _ in wheels], "passed": time.time()},
                                    indent=1))
    return result
