"""Where `builder xla-check` runs a script: the smoke image for a torch / torch_xla pair.

Preparing it reuses the pipeline's pieces (stage images, prebuilt wheels fetched into
the local index, the smoke image keyed by python stage + wheel hashes), so the first
xla-check on a machine costs what `builder wheels --torch X --xla X` costs and later
ones start a container at once. The run itself: the script's directory mounted
read-only, ``--network none``, PJRT_DEVICE=CPU, PT_XLA_DEBUG_LEVEL=2, the runner from
builder.xla.check wrapping the script; its output is shown live (minus torch_xla's
analysis wall, kept in the log) and parsed afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from builder.config import Config
from builder.engine import ContainerSpec, Engine, Mount
from builder.errors import ConfigError
from builder.index.directory import DirectoryIndex
from builder.recipes.xla_pairing import check_pair, series
from builder.recipes.xla_smoke import ensure_image, is_real_torch_xla
from builder.xla.check import CONTAINER_ROOT, is_noise
from builder.xla.runner import RUNNER

DEFAULT_VERSION = "2.9.0"
Note = Callable[[str], None]


@dataclass
class Environment:
    image: str
    torch: str  # wheel file names
    xla: str
    image_reused: bool
    image_seconds: float


def default_versions(index: DirectoryIndex, torch: str | None, xla: str | None) -> tuple[str, str]:
    """The pair to check with: as given; else the newest real torch_xla in the index and a
    torch of its series there; else 2.9.0."""
    if xla is None:
        real = [e for e in index.entries() if e.normalized == "torch-xla" and is_real_torch_xla(index.files_dir /
                                                                                                 e.filename)]
        xla = max(real, key=lambda e: _version(e.version)).version if real else (torch or DEFAULT_VERSION)
    if torch is None:
        same = [e for e in index.entries() if e.normalized == "torch" and _same_series(e.version, xla)]
        torch = max(same, key=lambda e: _version(e.version)).version if same else "{}.{}.0".format(*series(xla))
    return torch, xla


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _same_series(version: str, other: str) -> bool:
    try:
        return series(version) == series(other)
    except ConfigError:
        return False


def prepare(cfg: Config, torch: str, xla: str, note: Note) -> Environment:
    """Stage images, the two wheels (fetched if missing) and the smoke image."""
    from builder.index.prebuilt import ensure_prebuilt
    from builder.recipes import get_recipe
    from builder.stages.images import bring_up

    check_pair(torch, xla)  # before anything is fetched
    engine = Engine()
    index = DirectoryIndex(cfg.index_dir)
    python = bring_up(engine, cfg, note).python
    torch_wheel = ensure_prebuilt(cfg, index, get_recipe("torch").project, torch, note)
    xla_wheel = ensure_prebuilt(cfg, index, get_recipe("xla").project, xla, note)
    if not is_real_torch_xla(index.files_dir / xla_wheel.filename):
        raise ConfigError(f"{xla_wheel.filename} in the index is not a real torch_xla (no torch_xla.debug.metrics "
                          "or parallel_loader)", "name a released torch_xla with --xla, e.g. --xla 2.9.0")
    image, reused, seconds = ensure_image(engine, index, python.tag, python.image_id,
                                          [(torch_wheel.filename, torch_wheel.sha256),
                                           (xla_wheel.filename, xla_wheel.sha256)], cfg.logs_dir, note)
    return Environment(image, torch_wheel.filename, xla_wheel.filename, reused, seconds)


class LiveOutput:
    """A log sink for Engine.run: everything goes to the log file; complete lines that are
    the script's own output also go to ``echo`` as they arrive."""

    def __init__(self, log, echo: Callable[[str], None], show_all: bool = False) -> None:
        self.log = log
        self.echo = echo
        self.show_all = show_all  # also torch_xla's analysis blocks
        self.partial = ""

    def write(self, text: str) -> int:
        self.log.write(text)
        self.partial += text
        *lines, self.partial = self.partial.split("\n")
        for line in lines:
            if self.show_all or (not is_noise(line) and line.strip()):
                self.echo(line)
        return len(text)

    def flush(self) -> None:
        self.log.flush()


def run_script(image: str, script: Path, args: list[str], log_path: Path, echo: Callable[[str], None],
               verbose: bool = False) -> tuple[str, int, float]:
    """Run ``script ARGS`` under the metrics runner; returns (output, exit code, seconds)."""
    script = script.resolve()
    inside = f"{CONTAINER_ROOT}/{script.name}"
    spec = ContainerSpec(
        image=image, command=["python", "-c", RUNNER, inside, *args], network="none", workdir=CONTAINER_ROOT,
        mounts=[Mount(str(script.parent), CONTAINER_ROOT, read_only=True)],
        environment={"PJRT_DEVICE": "CPU", "PT_XLA_DEBUG_LEVEL": "2", "PYTHONUNBUFFERED": "1",
                     "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp/xla-check-home"},
        labels={"builder.step": "xla-check"})
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log_path.open("w") as log:
        log.write(f"# {script} {' '.join(args)} in {image}\n")
        sink = LiveOutput(log, echo, show_all=verbose)
        result = Engine().run(spec, sink)  # type: ignore[arg-type]
    return result.output, result.exit_code, time.monotonic() - started
