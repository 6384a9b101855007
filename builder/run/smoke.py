"""The smoke check: the run's wheels installed in a fresh container from the local index
alone (no network) and each recipe's smoke code run; skipped when this exact set of
wheel bytes passed on this image before."""

from __future__ import annotations

import hashlib
import json
import time
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name

from builder.config import Config
from builder.console import Note
from builder.engine import ContainerSpec, Engine, Mount
from builder.errors import BuildError
from builder.files import atomic_write
from builder.index.directory import DirectoryIndex
from builder.index.wheelmeta import parse_filename, requirement_of
from builder.mounts import INDEX_MOUNT
from builder.recipes import get_recipe
from builder.recipes.base import SmokeRun, pip_from_local_index
from builder.run.wheelstep import StepOutcome
from builder.stages.images import StageResult
from builder.stages.installed import ensure_installed


def smoke_check(engine: Engine, cfg: Config, index: DirectoryIndex, image: str, image_id: str,
                outcomes: list[StepOutcome], log_path: Path) -> None:
    """Install the wheels in a fresh container from the index alone (no network) and run
    each recipe's smoke code. The wheels others of the run build against (torch under an
    extension) come from a layer over ``image`` that has those exact files installed."""
    plans = [wheel_smoke(cfg, index, o) for o in outcomes]
    requirements = [requirement for requirement, _ in plans]
    code = "\n".join(smoke for _, smoke in plans)
    script = f"set -eu\nmkdir -p $HOME\n{pip_from_local_index(*requirements)}\ncd /tmp\npython -c \"$SMOKE\"\n"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        base = underlying_wheels(cfg, outcomes)
        if base:  # installed once per key; the run's own wheels go on top, from the index alone
            image = ensure_installed(engine, index.root, image, image_id, base, log).tag
        result = engine.run(ContainerSpec(
            image=image, command=["sh", "-c", script], environment={"SMOKE": code, "HOME": "/tmp/home",
                                                         "PYTHONDONTWRITEBYTECODE": "1"},
            mounts=[Mount(str(index.root), INDEX_MOUNT, read_only=True)], network="none",
            labels={"builder.step": "smoke"}), log)
    if result.exit_code != 0:
        tail = "\n".join(result.output.strip().splitlines()[-5:])
        raise BuildError(f"smoke check of {', '.join(requirements)} failed (exit {result.exit_code}): {tail}",
                         f"see the log {log_path}")


def underlying_wheels(cfg: Config, outcomes: list[StepOutcome]) -> list[tuple[str, str]]:
    """(filename, sha256) of the run's wheels that another wheel of the run builds against."""
    against = {name for o in outcomes for name in get_recipe(o.recipe, cfg).builds_against}
    return [(o.filename, o.sha256) for o in outcomes if o.recipe in against]


def smoke_key(cfg: Config, image_id: str, outcomes: list[StepOutcome]) -> str:
    code = "\n".join(get_recipe(o.recipe, cfg).smoke_code() for o in outcomes)
    payload = json.dumps([image_id, sorted(o.sha256 for o in outcomes), code])
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def run_smoke(engine: Engine, cfg: Config, index: DirectoryIndex, stage: StageResult,
              outcomes: list[StepOutcome], force: bool) -> str:
    """Smoke-check the wheels, unless this exact set (same image, same wheel bytes) passed before."""
    key = smoke_key(cfg, stage.image_id, outcomes)
    record = Path(cfg.data_dir) / "smoke" / f"{key}.json"
    if record.is_file() and not force:
        return "reused"
    smoke_check(engine, cfg, index, stage.tag, stage.image_id, outcomes, cfg.logs_dir / "smoke.log")
    record.parent.mkdir(parents=True, exist_ok=True)  # a fresh data dir has no smoke/ yet
    atomic_write(record, json.dumps({"key": key, "wheels": [o.filename for o in outcomes], "passed": time.time()}))
    return "passed"


def run_smokes(engine: Engine, cfg: Config, index: DirectoryIndex, stage: StageResult, outcomes: list[StepOutcome],
               force: bool, note: Note) -> tuple[str, dict | None]:
    """The run's smoke: a recipe's own when one applies (xla's lazy-execution check on a
    real torch_xla), else each recipe's import smoke. (status, figures or None)."""
    run = SmokeRun(engine, index, stage.tag, stage.image_id, tuple((o.filename, o.sha256) for o in outcomes),
                   Path(cfg.data_dir), cfg.logs_dir, force, note)
    for name in dict.fromkeys(o.recipe for o in outcomes):
        own = get_recipe(name, cfg).own_smoke(run)
        if own is not None:
            return own
    return run_smoke(engine, cfg, index, stage, outcomes, force), None


def top_level_packages(wheel: Path) -> list[str]:
    """The importable packages a wheel installs (``name/__init__.py`` at its root)."""
    with zipfile.ZipFile(wheel) as zf:
        names = {n.split("/", 1)[0] for n in zf.namelist() if n.count("/") == 1 and n.endswith("/__init__.py")}
    return sorted(n for n in names if not n.endswith((".dist-info", ".data")))


def wheel_smoke(cfg: Config, index: DirectoryIndex, outcome: StepOutcome) -> tuple[str, str]:
    """(requirement, smoke code) for one wheel of a run. The requirement names the wheel's
    own project and version. A wheel of the recipe's project runs the recipe's smoke; any
    other wheel a recipe built (an out-of-tree extension, like the xla_real_ext fixture)
    imports its packages, after what its recipe builds against."""
    recipe = get_recipe(outcome.recipe, cfg)
    requirement = requirement_of(outcome.filename)
    if parse_filename(outcome.filename).normalized == canonicalize_name(recipe.project):
        return requirement, recipe.smoke_code()
    first = [get_recipe(name, cfg).import_name for name in recipe.builds_against]
    packages = top_level_packages(index.files_dir / outcome.filename)
    code = "".join(f"import {m}\n" for m in first) + "".join(
        f"import {p}\nprint({p!r}, 'imported')\n" for p in packages)
    return requirement, code
