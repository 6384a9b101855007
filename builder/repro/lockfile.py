"""builder.lock, the file: what it records, its JSON form, and the checks on reading it.

The lock file (``builder.lock``, JSON, meant to be committed) records, read back from the
built images rather than from what was asked (builder.repro.lock does the reading):

- the base image (reference, ID, registry digests) and the Debian packages in it;
- per stage: its key, tag and image ID, a digest of its unlocked recipe (so a lock made
  for another builder.toml is refused), every installed Debian package and version
  (``dpkg-query -W``), and for the python stage every pip package with the sha256 of the
  file pip installs (``pip download`` in the stage);
- per recipe, the deps layer of its locked commit (its build requirements);
- the SHAs of the source refs named when locking;
- per prebuilt package named by a version (torch_tpu 0.2.0, a torch 2.13.0): that version and
  the sha256 of its wheel and of each dependency wheel a run takes with it (libtpu ...).

Every value that reaches a Dockerfile line is checked when the file is read: it is
committed and edited by people.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from builder import __version__, validate
from builder.errors import BuilderError, ValidationError
from builder.files import atomic_write

LOCK_VERSION = 1
DEFAULT_LOCK = "builder.lock"


class LockError(BuilderError):
    """builder.lock cannot be honoured (stale, unreadable, not installable, ref moved)."""


@dataclass(frozen=True)
class PipPin:
    version: str
    sha256: str = ""  # empty for pip itself, which the venv brings


@dataclass(frozen=True)
class StageLock:
    name: str
    key: str
    tag: str
    image_id: str
    spec_digest: str
    apt: dict[str, str]
    pip: dict[str, PipPin] = field(default_factory=dict)


@dataclass(frozen=True)
class BaseLock:
    ref: str
    image_id: str
    digests: list[str]
    apt: dict[str, str]


@dataclass(frozen=True)
class SourceLock:
    url: str
    ref: str
    sha: str


@dataclass(frozen=True)
class PrebuiltLock:
    version: str
    files: dict[str, str]  # wheel file name -> sha256: the package's wheel, then its dependencies'


@dataclass(frozen=True)
class Lock:
    base: BaseLock
    stages: dict[str, StageLock]
    sources: dict[str, SourceLock] = field(default_factory=dict)
    # Per recipe: the deps layer of its locked source (build requirements from the commit).
    deps: dict[str, StageLock] = field(default_factory=dict)
    prebuilt: dict[str, PrebuiltLock] = field(default_factory=dict)  # recipe name -> its locked wheels
    # The wheel audit's settings ([wheels] plat, external_libs) and the auditwheel it ran with:
    # which platform tag the wheels get (builder.repro.audit); --locked refuses other settings.
    wheels: dict[str, str] = field(default_factory=dict)
    builder_version: str = __version__
    version: int = LOCK_VERSION


# ------------------------------------------------------------------------ file format
def lock_to_json(lock: Lock) -> str:
    return json.dumps(dataclasses.asdict(lock), indent=2, sort_keys=True) + "\n"


def lock_from_json(text: str, where: str = DEFAULT_LOCK) -> Lock:
    try:
        data = json.loads(text)
        if data.get("version") != LOCK_VERSION:
            raise LockError(f"{where}: lock format {data.get('version')!r}, this builder reads {LOCK_VERSION}",
                            "re-create it with `builder lock`")
        stages = {name: StageLock(**{**s, "pip": {k: PipPin(**v) for k, v in s.get("pip", {}).items()}})
                  for name, s in data["stages"].items()}
        deps = {name: StageLock(**{**s, "pip": {k: PipPin(**v) for k, v in s.get("pip", {}).items()}})
                for name, s in data.get("deps", {}).items()}
        lock = Lock(base=BaseLock(**data["base"]), stages=stages, deps=deps,
                    sources={k: SourceLock(**v) for k, v in data.get("sources", {}).items()},
                    prebuilt={k: PrebuiltLock(v["version"], dict(v["files"]))
                              for k, v in data.get("prebuilt", {}).items()},
                    wheels={str(k): str(v) for k, v in data.get("wheels", {}).items()},
                    builder_version=data.get("builder_version", ""), version=data["version"])
        _check_values(lock)
        return lock
    except LockError:
        raise
    except ValidationError as exc:
        raise LockError(f"{where}: {exc.message}", "re-create it with `builder lock`") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LockError(f"{where} is not a valid builder lock file ({type(exc).__name__}: {exc})",
                        "re-create it with `builder lock`") from None


_DEB_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]*$")


def _check_values(lock: Lock) -> None:
    """Every value that reaches a Dockerfile line has the shape it should (the file is
    committed and edited by people; the templates quote, this refuses nonsense early)."""
    for where, apt in [("base", lock.base.apt), *((n, s.apt) for n, s in lock.stages.items())]:
        for name, version in apt.items():
            if not _DEB_NAME.match(name):
                raise ValidationError(f"{where}: {name!r} is not a Debian package name")
            validate.deb_version(version, f"{where}: {name} version")
    for name, stage in [*lock.stages.items(), *((f"deps {n}", s) for n, s in lock.deps.items())]:
        for project, pin in stage.pip.items():
            validate.package_name(project, f"{name}: pip package")
            validate.py_version(pin.version, f"{name}: {project} version")
            if pin.sha256 and not re.fullmatch(r"[0-9a-f]{64}", pin.sha256):
                raise ValidationError(f"{name}: {project} sha256 {pin.sha256!r} is not 64 hex digits")
    for recipe, source in lock.sources.items():
        validate.sha(source.sha, f"sources: {recipe} sha")
    for recipe, locked in lock.prebuilt.items():
        validate.py_version(locked.version, f"prebuilt: {recipe} version")
        for filename, sha256 in locked.files.items():
            if not re.fullmatch(r"[A-Za-z0-9_.+!-]+\.whl", filename):
                raise ValidationError(f"prebuilt: {recipe}: {filename!r} is not a wheel file name")
            if not re.fullmatch(r"[0-9a-f]{64}", sha256):
                raise ValidationError(f"prebuilt: {recipe}: {filename} sha256 {sha256!r} is not 64 hex digits")


def load_lock(path: Path | str) -> Lock:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise LockError(f"cannot read the lock file {path}: {exc.strerror or exc}",
                        "create it with `builder lock`, or pass --lock-file") from None
    return lock_from_json(text, str(path))


def write_lock(lock: Lock, path: Path | str) -> None:
    atomic_write(path, lock_to_json(lock))
