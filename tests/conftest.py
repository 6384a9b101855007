"""Shared fixtures. Docker-backed tests run against the real daemon: a missing daemon
is a failure naming how to start one, never a skip (on CI and on a laptop alike).

The suite runs in a time zone far from UTC with a daylight-saving rule, set here before
any test module (or builder) is imported: reproducible output (wheel timestamps, dates
in versions) must not depend on the machine's zone, and on a UTC machine a localtime()
where gmtime() belongs would go unnoticed. The rule is America/Santiago's written out as
a POSIX TZ string, so it needs no tzdata; subprocesses (the `builder` CLI) inherit it.

The user's caches are not the suite's: builder's download cache defaults to
``$XDG_CACHE_HOME/builder/downloads`` (the user's), so the suite points XDG_CACHE_HOME at
a directory of its own, removed at the end (its bytecode cache likewise); pip's and uv's
caches stay where they were (PIP_CACHE_DIR, UV_CACHE_DIR), so the suite's own installs are
not made cold."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

# Before any test module (hence builder) is imported: conftest.py is loaded first.
TEST_TZ = "<-04>4<-03>,M9.1.6/24,M4.1.6/24"  # UTC-4, and UTC-3 from September to April
os.environ["TZ"] = TEST_TZ
time.tzset()
if time.timezone == 0 or not time.daylight:  # the C library ignored TZ: the suite would not test what it says
    raise RuntimeError(f"TZ={TEST_TZ} did not take effect (time.timezone={time.timezone})")

_HOME_CACHE = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
os.environ.setdefault("PIP_CACHE_DIR", os.path.join(_HOME_CACHE, "pip"))
os.environ.setdefault("UV_CACHE_DIR", os.path.join(_HOME_CACHE, "uv"))
SUITE_CACHE = Path(tempfile.mkdtemp(prefix="builder-test-xdg-cache-"))
os.environ["XDG_CACHE_HOME"] = str(SUITE_CACHE)
atexit.register(shutil.rmtree, SUITE_CACHE, True)
# The `builder` runs (hundreds of subprocesses) cache their bytecode as an installed builder
# has it: a machine whose environment sets PYTHONDONTWRITEBYTECODE would make each one
# compile builder's ~85 modules again (0.13 s each). The cache is the suite's own, outside
# the checkout (PYTHONPYCACHEPREFIX), removed at the end.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
SUITE_BYTECODE = Path(tempfile.mkdtemp(prefix="builder-test-pyc-"))
os.environ["PYTHONPYCACHEPREFIX"] = str(SUITE_BYTECODE)
atexit.register(shutil.rmtree, SUITE_BYTECODE, True)
# The fixture repos (builder.examples) are a few MB, not pytorch: the recipes' real disk
# figures (Recipe.disk_gib, tens of GiB) would refuse them on a small disk. Only the floor,
# [build] min_free_disk_gib, applies; a test of the estimate sets this variable itself.
os.environ["BUILDER_BUILD_DISK_ESTIMATE_SCALE"] = "0"

REPO = Path(__file__).resolve().parent.parent
HOST_CA = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
BASE_TAG = "builder/debian:bookworm-minbase"


def pytest_collection_modifyitems(config, items):
    """The costliest modules first (tests/helpers_order.py), unless pytest-randomly shuffles
    the run (`make test-random`): its order is the point of that run."""
    if config.pluginmanager.has_plugin("randomly"):
        return
    from tests.helpers_order import costliest_first

    items[:] = costliest_first(items)


def run_builder(*args: str, config: Path | None = None, env: dict[str, str] | None = None,
                check: bool = False, timeout: float = 1800, cwd: Path | None = None
                ) -> subprocess.CompletedProcess[str]:
    """Run the real `builder` CLI in a subprocess, as a user would."""
    command = [sys.executable, "-m", "builder"]
    if config is not None:
        command += ["--config", str(config)]
    full_env = {**os.environ, **(env or {})}
    done = subprocess.run([*command, *args], capture_output=True, text=True, env=full_env,
                          timeout=timeout, cwd=cwd)
    if check and done.returncode != 0:
        raise AssertionError(f"builder {' '.join(args)} failed ({done.returncode}):\n"
                             f"{done.stdout}\n{done.stderr}")
    return done


def dead_pid() -> int:
    """The pid of a process of ours that has ended (not reused this soon): an owner that is gone."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def wait_for_container(engine, proc, step: str = "torch", timeout: float = 120):
    """The running step container of the builder process ``proc`` (other builds may run on
    the daemon); fails when it has not started in ``timeout`` s or ``proc`` ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        found = engine.client.containers.list(
            filters={"label": [f"builder.step={step}", f"builder.pid={proc.pid}"]})
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"the {step} container never started (builder exit {proc.poll()})")


def tree(directory: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under ``directory`` with its size, inode and mtime: a publish changes it,
    a republish of a file already there too (atomic: a new file renamed into place)."""
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_ino, p.stat().st_mtime_ns)
            for p in directory.rglob("*") if p.is_file()} if directory.is_dir() else {}


AGAINST_LAYER = re.compile(r"^# against layer (builder/installed:\w+) \((made|reused)\): (.+)$", re.M)


def against_layer(log_text: str) -> tuple[str, list[str]] | None:
    """The installed layer a build step's log says its container started from, and the
    wheel files that layer holds (builder.run.wheelstep writes the line, made or reused)."""
    found = AGAINST_LAYER.search(log_text)
    return (found.group(1), found.group(3).split(", ")) if found else None


def leftover_containers(engine, env) -> list[str]:
    """Containers of this test's runs (other builds may share the daemon): builder's step
    and smoke containers with a mount under the test's directory ``env["root"]``."""
    root = str(env["root"])
    return [c.name for c in engine.containers_with_label("builder.step")
            if any((m.get("Source") or "").startswith(root) for m in c.attrs.get("Mounts", []))]


def venv_tool(name: str) -> str:
    """A console script installed with the test extras (devpi-server, twine...), found beside
    this interpreter: `make test` runs .venv/bin/python without the venv on PATH, and CI
    runs with PATH reduced to the system directories, so a bare name would pass only where
    the tool happens to be installed system-wide."""
    path = Path(sys.executable).parent / name
    if not path.is_file():
        pytest.fail(f"{name} is not installed beside {sys.executable}; run `make setup` "
                    "(it installs the test extras into .venv)")
    return str(path)


_MIRROR: list = []


def bazel_mirror_url() -> str:
    """A Bazel release mirror on 127.0.0.1 serving the fake Bazel (builder.examples), one
    per test process: bazelisk in the xla builds downloads the Bazel of fakexla's
    .bazelversion from it, as it would from releases.bazel.build."""
    if not _MIRROR:
        from builder.examples import BazelMirror

        root = Path(tempfile.mkdtemp(prefix="builder-bazel-mirror-"))
        _MIRROR.append(BazelMirror(root))
        atexit.register(shutil.rmtree, root, True)
        atexit.register(_MIRROR[0].close)  # runs first: the server stops, then its files go
    return _MIRROR[0].url


def write_config(path: Path, data_dir: Path, extra: str = "", base: str = BASE_TAG) -> Path:
    """A builder.toml for tests: the host's CA bundle (so pip in containers reaches PyPI
    through this machine's TLS proxy), a private data dir, the test Bazel mirror, plus
    ``extra`` TOML, on the shared base image unless ``base`` names another tag. Each config
    downloads into a cache of its own (``<data_dir>/downloads``) unless ``extra`` names one:
    a test that counts downloads must not see another's."""
    if "download_cache" not in extra:
        own = f'download_cache = "{data_dir / "downloads"}"\n'
        extra = (extra.replace("[prebuilt]\n", "[prebuilt]\n" + own, 1) if "[prebuilt]\n" in extra
                 else extra + ("" if not extra or extra.endswith("\n") else "\n") + "[prebuilt]\n" + own)
    path.write_text(
        f'data_dir = "{data_dir}"\n'
        f"[base]\nimage = \"{base}\"\n"
        f"[ca]\nextra_certificates = \"{HOST_CA}\"\n"
        f"[bazel]\nbase_url = \"{bazel_mirror_url()}\"\n" + extra
    )
    return path


@pytest.fixture(scope="session")
def engine():
    from builder.engine import Engine
    from builder.errors import DockerUnavailable

    try:
        return Engine()
    except DockerUnavailable as exc:
        pytest.fail(f"no Docker engine answers ({exc}); start one with `sudo .ci/dockerd-up`, "
                    "or run `make test`, which starts one when run as root")


@pytest.fixture(scope="session")
def base_image(engine, tmp_path_factory, worker_id) -> str:
    """The bootstrapped base image, made once per machine through the real command. The
    suite's workers (pytest-xdist) share one: the first to need it bootstraps it under a
    lock in the run's shared temp dir, the others wait and find it there."""
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    with FileLock(str(shared / "base-image.lock")):
        if engine.image_id(BASE_TAG) is None:
            data = tmp_path_factory.mktemp("bootstrap")
            cfg = write_config(data / "builder.toml", data)
            run_builder("base", "bootstrap", config=cfg, check=True)
    return BASE_TAG


def stages_on(engine, base_tag: str) -> list[str]:
    """IDs of builder's stage images made on the base image tagged ``base_tag``: the base
    stages whose FROM named it, then every stage whose ``builder.parent-id`` chains to one
    of them, parents before children."""
    images = engine.client.images.list(filters={"label": "builder.stage"})
    children: dict[str, list[str]] = {}
    for image in images:
        children.setdefault(image.labels.get("builder.parent-id", ""), []).append(image.id)
    found = [i.id for i in images if i.labels.get("org.opencontainers.image.base.name") == base_tag]
    for image_id in found:  # grows while it is walked: breadth first
        found += [c for c in children.get(image_id, []) if c not in found]
    return found


@contextlib.contextmanager
def own_base(engine, base_image: str, name: str) -> Iterator[str]:
    """The shared base image under a tag of this run only: every stage built on it has a
    key of its own (the base stage's FROM names the tag), so a test may remove a stage it
    made (a deps layer, to stand for a machine that never built it) without pulling one
    from under another test, or the user, building on the shared base at the same time.
    On exit the stages made on it and the tag are removed; the shared image stays."""
    tag = f"builder/debian:{name}-{uuid.uuid4().hex[:8]}"
    engine.client.images.get(base_image).tag(tag)
    try:
        yield tag
    finally:
        for image_id in reversed(stages_on(engine, tag)):
            engine.remove_image(image_id)
        engine.remove_image(tag)  # the tag only: the image stays under the shared one
