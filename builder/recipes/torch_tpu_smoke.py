"""The TorchTPU smoke: does the glue for *this* torch load, and is the backend registered?

``import torch_tpu`` succeeding proves little: the loader could have taken another glue
than the one builder paired, or a glue could load and break later. So the program, run
in a clean container (the run's wheels and their dependencies installed from the local
index alone, ``--network none``, pip's machine config off: the image of
builder.recipes.xla_smoke.ensure_image, committed once per wheel set), checks:

- after ``import torch``, whether torch's device-backend autoload already imported
  torch_tpu (``autoloaded``);
- the ``torch.backends`` entry point is registered in the installed metadata, points
  into torch_tpu and loads (``importlib.metadata``, as torch's ``_import_device_backends``);
- every loaded ``torch_tpu._internal.*`` native module came from a file with the glue
  suffix builder chose from the wheel for this torch (passed as argv[1]), and at least
  one did (``torch_tpu._internal.env`` is imported when nothing else loaded one);
- a TPU: ``torch_tpu._internal.utils.hardware.get_tpu_device_count()``; with none, the
  device is not exercised and the figures say so as a note, never as a pass of the
  device; with one, ``torch.ones(4, device="tpu").sum()`` must be 4.

The program prints its figures as JSON on one marker line, which the host parses.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from builder.engine import ContainerSpec
from builder.errors import BuildError
from builder.files import atomic_write
from builder.index.directory import DirectoryIndex
from builder.index.wheelmeta import parse_filename
from builder.recipes.base import SmokeRun, marked_json
from builder.recipes.torch_tpu_pairing import ENTRY_POINT_GROUP, pair, read_tpu_wheel
from builder.recipes.xla_smoke import ensure_image

MARKER = "@@builder-torch-tpu-smoke@@"
NO_TPU = "no TPU: device not exercised"

PROGRAM = r'''
import importlib, importlib.metadata as md, json, sys
expected = sys.argv[1]
import torch
autoloaded = "torch_tpu" in sys.modules
import torch_tpu

def glue_modules():
    found = {}
    for name, module in list(sys.modules.items()):
        origin = str(getattr(getattr(module, "__spec__", None), "origin", "") or "")
        if name.startswith("torch_tpu._internal.") and origin.endswith(".so"):
            found[name] = origin.rsplit("/", 1)[-1]
    return found

loaded = glue_modules()
if not loaded:
    importlib.import_module("torch_tpu._internal.env")
    loaded = glue_modules()
wrong = {n: f for n, f in loaded.items() if not f.endswith("_" + expected + ".so")}
points = [e for e in md.entry_points(group="@GROUP@") if e.value.split(":")[0].split(".")[0] == "torch_tpu"]
entry = f"{points[0].name} = {points[0].value}" if points else ""
loads = bool(points) and callable(points[0].load())
try:
    from torch_tpu._internal.utils import hardware
    tpus = int(hardware.get_tpu_device_count())
except Exception as exc:
    tpus, tpu_error = 0, repr(exc)
else:
    tpu_error = ""
device = ""
if tpus:
    value = float(torch.ones(4, device="tpu").sum().cpu())
    device = "exercised" if value == 4.0 else f"wrong result {value}"
loader = sys.modules.get("torch_tpu._versioned_so_loader")
print("@MARKER@" + json.dumps({
    "torch": torch.__version__, "torch_tpu": getattr(torch_tpu, "__version__", "")
    or md.version("torch_tpu"), "expected_glue": expected,
    "loader_glue": getattr(loader, "_VERSION_SUFFIX", None), "glue_modules": sorted(loaded.values()),
    "wrong_glue": wrong, "entry_point": entry, "entry_point_loads": loads, "autoloaded": autoloaded,
    "tpus": tpus, "tpu_error": tpu_error, "device": device}), flush=True)
'''.replace("@GROUP@", ENTRY_POINT_GROUP).replace("@MARKER@", MARKER)

# the import smoke's code (builder.run.smoke keys on it); the own smoke below runs PROGRAM
SMOKE_CODE = "import torch, torch_tpu\nprint('torch', torch.__version__, 'torch_tpu imported')\n"


def tpu_wheels(index: DirectoryIndex, wheels: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every wheel of the run when one is a torch_tpu (then this smoke applies), else []."""
    if any(parse_filename(name).normalized == "torch-tpu" for name, _ in wheels):
        return list(wheels)
    return []


def expected_glue(index: DirectoryIndex, wheels: list[tuple[str, str]]) -> tuple[str, str]:
    """(glue suffix, how) builder pairs for the run's torch and torch_tpu wheels."""
    by_project = {canonicalize_name(parse_filename(n).name): n for n, _ in wheels}
    torch_version = parse_filename(by_project["torch"]).version
    wheel = read_tpu_wheel(index.files_dir / by_project["torch-tpu"])
    paired = pair(torch_version, wheel)
    if not paired.ok:
        raise BuildError(f"torch_tpu {wheel.version} does not pair with torch {torch_version}: {paired.why}")
    return paired.glue, paired.why


def verdict(figures: dict[str, Any]) -> list[str]:
    """Why the smoke fails; empty when it passes (a missing TPU is not a failure)."""
    problems = []
    expected = figures.get("expected_glue")
    if not figures.get("glue_modules"):
        problems.append("no torch_tpu._internal native module was loaded")
    if figures.get("wrong_glue"):
        problems.append(f"glue for another torch loaded (expected _{expected}.so): {figures['wrong_glue']}")
    if figures.get("loader_glue") not in (None, expected):
        problems.append(f"the loader chose glue {figures['loader_glue']}, builder paired {expected}")
    if not figures.get("entry_point"):
        problems.append(f"no {ENTRY_POINT_GROUP} entry point of torch_tpu is registered")
    elif not figures.get("entry_point_loads"):
        problems.append(f"the {ENTRY_POINT_GROUP} entry point {figures['entry_point']} does not load a callable")
    if figures.get("tpus") and figures.get("device") != "exercised":
        problems.append(f"{figures['tpus']} TPU(s), but the device check gave {figures.get('device')!r}")
    return problems


def summary(figures: dict[str, Any]) -> str:
    glue = figures.get("expected_glue", "?")
    modules = len(figures.get("glue_modules") or [])
    device = f"{figures['tpus']} TPU(s) exercised" if figures.get("tpus") else NO_TPU
    return (f"torch {figures.get('torch')}: glue {glue} loaded ({modules} native module(s)); "
            f"{ENTRY_POINT_GROUP} entry point {figures.get('entry_point')}"
            + (" (autoloaded by import torch)" if figures.get("autoloaded") else "") + f"; {device}")


def parse_figures(output: str) -> dict[str, Any] | None:
    return marked_json(output, MARKER)


def smoke(run: SmokeRun, wheels: list[tuple[str, str]]) -> dict[str, Any]:
    """The smoke's figures (with ``summary`` and ``note``); BuildError when it fails.
    Skipped (the recorded figures, ``reused``) when this image and program passed before."""
    glue, how = expected_glue(run.index, wheels)
    tag, _, _ = ensure_image(run.engine, run.index, run.image_tag, run.image_id, wheels, run.logs_dir, run.note)
    key = hashlib.sha256(json.dumps([tag, PROGRAM, glue]).encode()).hexdigest()[:32]
    record = run.data_dir / "smoke" / f"{key}.json"
    if record.is_file() and not run.force:
        try:
            return {**json.loads(record.read_text())["figures"], "reused": True}
        except (ValueError, KeyError, TypeError):
            pass  # unreadable: measure again
    if run.note:
        run.note(f"torch_tpu smoke in {tag} (--network none): expecting glue {glue} ({how}) ...")
    log_path = Path(run.logs_dir) / f"torch-tpu-smoke-{key}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    spec = ContainerSpec(image=tag, command=["python", "-c", PROGRAM, glue], network="none", workdir="/tmp",
                         environment={"HOME": "/tmp/smoke-home", "PYTHONUNBUFFERED": "1"},
                         labels={"builder.step": "torch-tpu-smoke"})
    with log_path.open("w") as log:
        result = run.engine.run(spec, log)
    figures = parse_figures(result.output)
    if figures is None:
        tail = "\n".join(result.output.strip().splitlines()[-8:])
        raise BuildError(f"the torch_tpu smoke program failed (exit {result.exit_code}) before reporting: {tail}",
                         f"see the log {log_path}")
    problems = verdict(figures)
    if problems:
        raise BuildError("torch_tpu smoke check failed: " + "; ".join(problems), f"see the log {log_path}")
    figures.update(summary=summary(figures), note="" if figures.get("tpus") else NO_TPU, log_path=str(log_path))
    if run.note and figures["note"]:
        run.note(f"torch_tpu smoke: {figures['note']}")
    record.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(record, json.dumps({"figures": figures, "passed": time.time()}, indent=1))
    return figures
