"""`builder wheels`: refs -> images -> torch wheel -> xla wheel -> smoke check, planned first.

Decisions (what to build, what is prebuilt) are made from the request before any
Docker call, and every ref is resolved before anything is built, so a typo costs one
``git ls-remote``. Prebuilt binaries are preferred where the user names a version.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from filelock import FileLock, Timeout
from packaging.version import InvalidVersion, Version

from builder.build import dist as dist_mod
from builder import validate
from builder.build import profile
from builder.recipes import xla_layout
from builder.xla import smoke as xla_smoke
from builder.source.buildreqs import BuildRequirements, missing_module_hint, read_build_requirements
from builder.build.ccache import CCACHE_MOUNT, CacheLocation, config_text, parse_location, read_only_env
from builder.config import Config
from builder.engine import ContainerSpec, Engine, Mount
from builder.errors import BuildError, ConfigError, IndexError_
from builder.index import prebuilt
from builder.stages.images import StageResult, build_stages, compiler_banners, prepare_base
from builder.index.directory import DirectoryIndex, Entry
from builder.index.deps import fetch_dependencies
from builder.interpreter import Interpreter
from builder.repro.manifest import PROVENANCE_TOOLS, ImageRef, Provenance
from builder.recipes.xla_pairing import check_config, check_pair
from builder.recipes.xla_pins import plan_pair, torch_source_version, unpinned_xla_version
from builder.stages.plan import deps_stage, image_stages
from builder.build.progress import StepProgress
from builder.recipes import BuildContext, built_projects, get_recipe
from builder.recipes.base import BAZEL_CACHE_MOUNT, INDEX_MOUNT, Recipe, pip_from_local_index
from builder.recipes.xla import BAZEL_DISK_CACHE, BAZELISK_HOME
from builder.source.refs import ResolvedRef, is_version, resolve_ref
from builder.build.resources import available_memory_gib, choose_jobs, free_disk_gib
from builder.source.mirror import checkout, commit_time, update_mirror
from builder.build.wheelstep import (
    WORK_DIR_LABEL,
    StepMounts,
    StepOutcome,
    container_env,
    find_reusable,
    remove_stale_work_dir,
    run_step,
    wheel_key,
)
from builder.recipes.xla_layout import torch_commit_of_wheel

Note = Callable[[str], None]


@dataclass(frozen=True)
class Target:
    """One package of the request: built from a resolved ref, or a prebuilt version."""

    recipe: str
    version: str = ""  # prebuilt version, when set
    ref: ResolvedRef | None = None


@dataclass(frozen=True)
class Request:
    torch: str | None = None  # None with xla set: the torch xla's .torch_commit pins
    xla: str | None = None
    torch_repo: str | None = None
    xla_repo: str | None = None
    jobs: int = 0
    smoke: bool = True
    torch_version: str = ""  # PYTORCH_BUILD_VERSION for a source build
    xla_version: str = ""
    force_smoke: bool = False
    lock_file: str = ""  # set: build exactly what this builder.lock records (`--locked`)
    torch_unpinned: bool = False  # build xla against a --torch other than its .torch_commit


@dataclass
class Report:
    stages: list[StageResult] = field(default_factory=list)
    steps: list[StepOutcome] = field(default_factory=list)
    smoke: str = "skipped"
    xla_smoke: dict | None = None  # the real torch_xla smoke's figures (builder.xla.smoke)
    jobs: int = 0
    seconds: float = 0.0
    trace: Path | None = None  # Chrome trace of the run (builder.build.profile.trace_events)
    timeline: list[tuple[str, float, float, str]] = field(default_factory=list)  # steps: label, start, s, status


def torch_target(repo: str, spec: str) -> Target:
    """A prebuilt torch version, or a ref resolved in ``repo``."""
    return Target("torch", version=spec) if is_version(spec) else Target("torch", ref=resolve_ref(repo, spec))


def plan_targets(cfg: Config, request: Request) -> list[Target]:
    """Resolve refs (git ls-remote) or accept versions; nothing is built yet."""
    check_config(cfg)
    torch_repo = request.torch_repo or cfg.repos.torch
    if request.torch is None and request.xla is None:
        raise ConfigError("nothing to build", "pass --torch REF and/or --xla REF")
    for name, spec in (("torch", request.torch), ("xla", request.xla)):
        if spec is not None and is_version(spec):
            validate.py_version(spec, f"--{name}")
    if request.xla is not None and is_version(request.xla):
        if request.torch is None:
            raise ConfigError(f"--xla {request.xla} is a prebuilt version: name its torch with --torch")
        if is_version(request.torch):
            check_pair(request.torch, request.xla)  # refused before anything is resolved, fetched or built
            return [torch_target(torch_repo, request.torch), Target("xla", version=request.xla)]
        torch = torch_target(torch_repo, request.torch)
        assert torch.ref is not None
        # a torch built from source: its version.txt (read from the mirror, no checkout) must pair
        source = request.torch_version or torch_source_version(Path(cfg.data_dir) / "mirrors", torch.ref)
        if source:
            check_pair(source, request.xla, f"torch {request.torch} ({torch.ref.sha[:12]}, version {source})")
        return [torch, Target("xla", version=request.xla)]
    if request.xla is None:
        assert request.torch is not None
        return [torch_target(torch_repo, request.torch)]
    xla = resolve_ref(request.xla_repo or cfg.repos.xla, request.xla)
    pair = plan_pair(Path(cfg.data_dir) / "mirrors", xla, request.torch, torch_repo, request.torch_unpinned,
                     request.torch_version, request.xla_version)
    torch = Target("torch", version=pair.torch_version) if pair.torch_ref is None \
        else Target("torch", ref=pair.torch_ref)
    return [torch, Target("xla", ref=xla)]


def plan_dist(cfg: Config, recipe: Recipe, requested_jobs: int, note: Note) -> tuple[tuple[str, str] | None, int]:
    """(scheduler, token) and the job count when this recipe's compiles go to sccache-dist;
    (None, 0) to compile here. A refused token is an error; an unreachable scheduler or an
    empty cluster is a note and a local build."""
    if not cfg.dist.scheduler or not recipe.compiler_launcher:
        return None, 0
    token = dist_mod.read_token(cfg.dist.token_file)
    status = dist_mod.probe(cfg.dist.scheduler, token)
    if status is None or status.servers == 0:
        why = "is unreachable" if status is None else "has no build servers"
        note(f"{recipe.project}: the sccache-dist scheduler {cfg.dist.scheduler} {why}: compiling on this machine "
             "(ccache)")
        return None, 0
    # the cluster's cores, and this machine's memory for preprocessing and linking (0.5 GiB a job)
    jobs = requested_jobs or max(1, min(status.cpus, int(available_memory_gib() / 0.5)))
    note(f"{recipe.project}: distributing compiles over {status.servers} sccache-dist servers "
         f"({status.cpus} cores) with {jobs} jobs")
    return (cfg.dist.scheduler, token), jobs


def ensure_prebuilt(cfg: Config, index: DirectoryIndex, recipe: Recipe, version: str, note: Note) -> StepOutcome:
    started = time.monotonic()
    entry = prebuilt.ensure_prebuilt(cfg, index, recipe.project, version, note)
    return StepOutcome(recipe.name, recipe.project, "prebuilt", entry.filename, entry.version, entry.sha256,
                       seconds=time.monotonic() - started)


def ccache_version(engine: Engine, image: str, remote: str) -> str:
    """The ccache version in the image (the remote storage key was renamed in 4.7)."""
    result = engine.run(ContainerSpec(image=image, command=["ccache", "--version"], network="none"))
    match = re.search(r"ccache version ([0-9.]+)", result.output)
    if not match:
        raise BuildError(f"cannot read the ccache version in {image}: {result.output.strip()[:200]}")
    for url in remote.split():  # ccache takes several remote storages, space separated
        feature = url.split(":", 1)[0] + "-storage"
        if feature not in result.output.split():
            raise BuildError(f"ccache {match.group(1)} in {image} lacks {feature} for {url}")
    return match.group(1)


def prepare_ccache(engine: Engine, cfg: Config, image: str, index_root: Path, bazel: str) -> StepMounts:
    """Create the cache (volume or dir), check the build user can write it, and write its
    shared config; a read-only cache gets the same settings as environment instead."""
    location = ensure_location(engine, parse_location(cfg.cache.ccache, "cache.ccache"))
    compiler_check = f"string:gcc-12={cfg.toolchain.gcc},clang-14={cfg.toolchain.clang}"
    if cfg.cache.ccache_read_only:
        return StepMounts(location.docker_source, bazel, index_root, True, read_only_env(compiler_check))
    version = ccache_version(engine, image, cfg.cache.ccache_remote) if cfg.cache.ccache_remote else ""
    text = config_text(cfg.cache.ccache_max_size, compiler_check, cfg.cache.ccache_remote, version or "4.7")
    user = build_user(cfg)
    # A host dir belongs to its owner: builder only checks that the build user may write it.
    group = user.partition(":")[2] if user else ""
    # A volume belongs to builder: give it (and anything an earlier user left) to the build
    # group, setgid and group-writable, so teammates with other uids but one gid share it.
    share = f"chmod 2777 {CCACHE_MOUNT} && "
    if group:
        share += (f"find {CCACHE_MOUNT} ! -group {group} -exec chgrp {group} {{}} + && "
                  f"find {CCACHE_MOUNT} -mindepth 1 -type d ! -perm -2070 -exec chmod g+rwxs {{}} + && ")
    prepare = (share if location.kind == "volume" else "") + (
        f'test -w {CCACHE_MOUNT} -a -x {CCACHE_MOUNT} || {{ echo "not writable"; exit 3; }}; '
        f'printf %s "$CONF" > {CCACHE_MOUNT}/ccache.conf.tmp.$$ && mv {CCACHE_MOUNT}/ccache.conf.tmp.$$ '
        f"{CCACHE_MOUNT}/ccache.conf && chmod 0664 {CCACHE_MOUNT}/ccache.conf")
    result = engine.run(ContainerSpec(image=image, command=["sh", "-c", prepare], environment={"CONF": text},
                                      mounts=[Mount(location.docker_source, CCACHE_MOUNT)], network="none",
                                      user="0:0" if location.kind == "volume" else user))
    if result.exit_code == 3 or (result.exit_code != 0 and "ermission denied" in result.output):
        raise BuildError(f"the ccache at {location.describe()} is not writable by the build user {user or 'root'}",
                         "make it group-writable for the team (chmod 2775 and a shared gid), "
                         "or set [cache] ccache_read_only = true to use it without writing")
    if result.exit_code != 0:
        raise BuildError(f"cannot write the ccache config into {location.describe()}: {result.output.strip()}")
    return StepMounts(location.docker_source, bazel, index_root)


def build_user(cfg: Config) -> str | None:
    """uid:gid of build containers: the config's, else the invoking user's (root stays root)."""
    if cfg.build.user:
        return cfg.build.user
    return None if os.geteuid() == 0 else f"{os.geteuid()}:{os.getegid()}"


def ensure_location(engine: Engine, location: CacheLocation) -> CacheLocation:
    """Create a cache's named volume or host directory if it does not exist yet."""
    if location.kind == "volume":
        engine.ensure_volume(location.value)
    else:
        Path(location.value).mkdir(parents=True, exist_ok=True)
    return location


def prepare_bazel_cache(engine: Engine, cfg: Config, image: str = "") -> str:
    """The Bazel cache location; with ``image``, its disk-cache and bazelisk dirs made in a
    volume (by root), everything in it writable for any build uid (as the ccache volume is
    for the build group): only entries not yet so are changed, so a warm cache costs a walk."""
    location = ensure_location(engine, parse_location(cfg.cache.bazel, "cache.bazel"))
    if image and location.kind == "volume":
        dirs = f"{BAZEL_CACHE_MOUNT} {BAZEL_DISK_CACHE} {BAZELISK_HOME}"
        # what an earlier build (another uid) left: readable and writable for the next one
        share = f"mkdir -p {dirs} && find {BAZEL_CACHE_MOUNT} ! -type l ! -perm -0666 -exec chmod a+rwX {{}} +"
        result = engine.run(ContainerSpec(image=image, command=["sh", "-c", share],
                                          mounts=[Mount(location.docker_source, BAZEL_CACHE_MOUNT)], network="none",
                                          user="0:0"))
        if result.exit_code != 0:
            raise BuildError(f"cannot prepare the Bazel cache {location.describe()}: {result.output.strip()}")
    return location.docker_source


def smoke_check(engine: Engine, index: DirectoryIndex, image: str, outcomes: list[StepOutcome],
                log_path: Path) -> None:
    """Install the wheels in a fresh container from the index alone (no network) and run
    each recipe's smoke code."""
    plans = [xla_smoke.wheel_smoke(index, o, get_recipe(o.recipe).smoke_code()) for o in outcomes]
    requirements = [requirement for requirement, _ in plans]
    code = "\n".join(smoke for _, smoke in plans)
    script = f"set -eu\nmkdir -p $HOME\n{pip_from_local_index(*requirements)}\ncd /tmp\npython -c \"$SMOKE\"\n"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        result = engine.run(ContainerSpec(
            image=image, command=["sh", "-c", script], environment={"SMOKE": code, "HOME": "/tmp/home"},
            mounts=[Mount(str(index.root), INDEX_MOUNT, read_only=True)], network="none",
            labels={"builder.step": "smoke"}), log)
    if result.exit_code != 0:
        tail = "\n".join(result.output.strip().splitlines()[-5:])
        raise BuildError(f"smoke check of {', '.join(requirements)} failed (exit {result.exit_code}): {tail}",
                         f"see the log {log_path}")


def give_tree_to(path: Path, user: str) -> None:
    uid, _, gid = user.partition(":")
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), int(uid), int(gid or uid))
    os.lchown(path, int(uid), int(gid or uid))


def record_last_build(cfg: Config, outcome: StepOutcome) -> None:
    """The cache's last-build figures, for `builder cache stats`."""
    if outcome.ccache is None:
        return
    path = Path(cfg.data_dir) / "cache-last.json"
    path.write_text(json.dumps({"cache": cfg.cache.ccache, "recipe": outcome.recipe, "wheel": outcome.filename,
                                "finished": time.time(), **outcome.ccache.as_dict()}))


def check_disk(path: Path, need_gib: float) -> None:
    free = free_disk_gib(path)
    if free < need_gib:
        raise BuildError(f"only {free:.1f} GiB free in {path}, the build needs {need_gib:.1f} GiB",
                         "free some space, or lower [build] min_free_disk_gib if the build is small")


@contextlib.contextmanager
def package_lock(cfg: Config, name: str, note: Note) -> Iterator[None]:
    """One builder run at a time per package and data dir (mirror, work tree, build):
    a second run waits here, then finds the wheel the first one published."""
    path = Path(cfg.data_dir) / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        note(f"{name}: another builder run holds {path}; waiting for it ...")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def build_target(engine: Engine, cfg: Config, index: DirectoryIndex, recipe: Recipe, ref: ResolvedRef,
                 request: Request, report: Report, stage: StageResult, torch_outcome: StepOutcome | None,
                 note: Note, provenance: Provenance | None = None,
                 requirements: BuildRequirements | None = None, torch_url: str = "",
                 progress: StepProgress | None = None, dist: tuple[str, str] | None = None) -> StepOutcome:
    """Reuse the wheel whose key is already in the index, else check out and compile."""
    with package_lock(cfg, recipe.name, note):
        return _build_target(engine, cfg, index, recipe, ref, request, report, stage, torch_outcome, note,
                             provenance, requirements, torch_url, progress, dist)


def commit_requirements(cfg: Config, ref: ResolvedRef, label: str) -> BuildRequirements:
    """The build requirements at ``ref``'s commit, read from its mirror (fetched if needed)."""
    return read_build_requirements(update_mirror(Path(cfg.data_dir) / "mirrors", ref.url, ref.sha), ref.sha, label)


def prepare_deps(engine: Engine, cfg: Config, ref: ResolvedRef, python_stage: StageResult, note: Note,
                 label: str, lock=None, extra: tuple[str, ...] = ()  # noqa: ANN001 - Lock
                 ) -> tuple[BuildRequirements, StageResult]:
    """Read the commit's build requirements from its mirror (no checkout) and bring up
    the deps layer that holds them, reused when another commit listed the same ones
    (with ``lock``: exactly the locked packages, installed with hashes)."""
    requirements = commit_requirements(cfg, ref, label)
    # ``extra``: what builder itself needs in the layer (sccache for a dist build)
    spec = deps_stage(cfg, requirements.requirements + extra, requirements.sources, requirements.bazel_version)
    report = lambda s, e: note(f"stage {s} ({label}): {e}")  # noqa: E731
    if lock is not None:
        from builder.repro.lock import build_locked_deps

        return requirements, build_locked_deps(engine, cfg, label, lock, spec, python_stage, report,
                                               cfg.logs_dir / "images")
    [stage] = build_stages(engine, cfg, [spec], report, cfg.logs_dir / "images", python_stage.image_id,
                           parent_ref=python_stage.tag)
    return requirements, stage


def _build_target(engine: Engine, cfg: Config, index: DirectoryIndex, recipe: Recipe, ref: ResolvedRef,
                  request: Request, report: Report, stage: StageResult, torch_outcome: StepOutcome | None,
                  note: Note, provenance: Provenance | None = None,
                  requirements: BuildRequirements | None = None, torch_url: str = "",
                  progress: StepProgress | None = None, dist: tuple[str, str] | None = None) -> StepOutcome:
    against_torch = torch_outcome if recipe.name != "torch" else None
    requirements = requirements or BuildRequirements("", (), ())
    ctx = BuildContext(
        jobs=report.jobs, source_date_epoch=0,
        version=request.torch_version if recipe.name == "torch" else request.xla_version,
        against=(f"torch=={against_torch.version}",) if against_torch else (),
        bazel_remote=cfg.cache.bazel_remote, cache_silo=f"builder-{stage.key}",
        backend=requirements.backend, bazel_version=requirements.bazel_version, bazel_base_url=cfg.bazel.base_url,
        dist_port=dist_mod.free_port() if dist else 0)
    mirror = update_mirror(Path(cfg.data_dir) / "mirrors", ref.url, ref.sha)
    ctx = replace(ctx, source_date_epoch=commit_time(mirror, ref.sha))
    torch_sha = against_torch.sha256 if against_torch else ""
    # torch_xla builds inside the torch checkout of its torch wheel's commit (builder.recipes.xla_layout)
    torch_source = (against_torch.source_sha or torch_commit_of_wheel(index.files_dir / against_torch.filename)
                    ) if against_torch and requirements.in_torch_checkout else ""
    if torch_source and not ctx.version:  # against another torch than its pin: a name of its own
        ctx = replace(ctx, version=unpinned_xla_version(Path(cfg.data_dir) / "mirrors", ref,
                                                        torch_url or cfg.repos.torch, torch_source))
    key = wheel_key(recipe, stage.image_id, ref.sha, container_env(recipe, ctx), torch_sha, ctx,
                    requirements.requirements, torch_source)
    reused = find_reusable(index, recipe, key, ref.sha)
    if reused is not None:
        return reused
    check_disk(Path(cfg.data_dir), cfg.build.min_free_disk_gib)
    mounts = prepare_ccache(engine, cfg, stage.tag, index.root,
                            prepare_bazel_cache(engine, cfg, stage.tag if recipe.name == "xla" else ""))
    note(f"{recipe.project}: {ref.ref} = {ref.sha[:12]}, checking out ...")
    tree = checkout(mirror, ref.url, ref.sha, Path(cfg.data_dir) / "src" / recipe.name)
    torch_tree = None
    if torch_source:
        assert against_torch is not None
        note(f"{recipe.project}: torch checkout at {torch_source[:12]} with {against_torch.filename}'s headers "
             "and libraries (no torch compile) ...")
        torch_tree = xla_layout.assemble(Path(cfg.data_dir) / "mirrors", torch_url or cfg.repos.torch,
                                         torch_source, index.files_dir / against_torch.filename,
                                         Path(cfg.data_dir) / "src" / "torch-for-xla")
    user = build_user(cfg)
    if user and os.geteuid() == 0:
        give_tree_to(tree.path, user)  # the build writes build/ inside the source
    provenance = replace(provenance or Provenance(), ref=ref.ref, torch_wheel=against_torch.filename if against_torch
                         else "", compilers=compiler_banners(engine, stage.tag, list(PROVENANCE_TOOLS)))
    note(f"{recipe.project}: building in {stage.tag} with {report.jobs} jobs ...")
    log_path = cfg.logs_dir / "wheels" / f"{recipe.name}-{ref.sha[:12]}.log"
    try:
        outcome = run_step(
            engine, index, recipe, ctx, tree, key, stage.tag, stage.image_id, mounts, Path(cfg.data_dir) / "work",
            log_path, network=cfg.build.network,
            user=user, nano_cpus=int(cfg.build.cpu_limit * 1e9) or None,
            mem_limit=f"{int(cfg.build.memory_limit_gib * 1024)}m" if cfg.build.memory_limit_gib else None,
            torch_sha256=torch_sha, provenance=provenance, torch_tree=torch_tree, profiles_root=Path(cfg.data_dir),
            progress=progress, dist=dist)
    except BuildError as exc:
        raise explain_failure(exc, log_path, recipe, ref, requirements, cfg) from exc
    record_last_build(cfg, outcome)
    return outcome


def explain_failure(exc: BuildError, log_path: Path, recipe: Recipe, ref: ResolvedRef,
                    requirements: BuildRequirements | None, cfg: Config | None = None) -> BuildError:
    """The cause a user can act on, when the log shows one (a missing build requirement,
    a Bazel bazelisk could not download)."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return exc
    hint = bazel_download_hint(text, requirements, cfg)
    if hint is None and requirements:
        where = " and ".join(requirements.sources) if requirements.sources else "requirements-build.txt"
        hint = missing_module_hint(text, requirements, where)
    if hint is None:
        return exc
    return BuildError(f"building {recipe.project} from {ref.sha[:12]} failed: {hint}", f"see the log {log_path}")


def bazel_download_hint(log_text: str, requirements: BuildRequirements | None, cfg: Config | None) -> str | None:
    """bazelisk's "could not download Bazel" as one line: which Bazel, from where, and the setting."""
    match = re.search(r"could not download Bazel:(.*)", log_text)
    if match is None:
        return None
    url = re.search(r"(?:HTTP GET |Get \")(https?://[^\s\"]+)", match.group(1))
    version = requirements.bazel_version if requirements and requirements.bazel_version else "?"
    configured = cfg.bazel.base_url if cfg else ""
    return (f"bazelisk could not download Bazel {version} (the commit's .bazelversion)"
            + (f" from {url.group(1)}" if url else "") + "; "
            + (f"check that the mirror [bazel] base_url = {configured!r} serves {version}/bazel-{version}-linux-x86_64"
               if configured else "give the build network access to releases.bazel.build, or set [bazel] base_url "
               "to a mirror of Bazel releases"))


def smoke_key(image_id: str, outcomes: list[StepOutcome]) -> str:
    code = "\n".join(get_recipe(o.recipe).smoke_code() for o in outcomes)
    payload = json.dumps([image_id, sorted(o.sha256 for o in outcomes), code])
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def run_smoke(engine: Engine, cfg: Config, index: DirectoryIndex, stage: StageResult,
              outcomes: list[StepOutcome], force: bool) -> str:
    """Smoke-check the wheels, unless this exact set (same image, same wheel bytes) passed before."""
    key = smoke_key(stage.image_id, outcomes)
    record = Path(cfg.data_dir) / "smoke" / f"{key}.json"
    if record.is_file() and not force:
        return "reused"
    smoke_check(engine, index, stage.tag, outcomes, cfg.logs_dir / "smoke.log")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"key": key, "wheels": [o.filename for o in outcomes], "passed": time.time()}))
    return "passed"


def run_wheels(cfg: Config, request: Request, note: Note, progress: StepProgress | None = None) -> Report:
    started = time.monotonic()
    report = Report()
    targets = plan_targets(cfg, request)  # bad refs fail here, before any Docker call
    lock = None
    if request.lock_file:
        from builder.repro.lock import build_locked_stages, check_sources, load_lock

        lock = load_lock(request.lock_file)
        check_sources(lock, [(t.recipe, t.ref.url, t.ref.ref, t.ref.sha) for t in targets if t.ref])
    engine = Engine()
    for name, labels in engine.reap_orphans():
        note(f"removed container {name} left behind by an interrupted earlier run")
        if remove_stale_work_dir(Path(cfg.data_dir) / "work", labels.get(WORK_DIR_LABEL, "")):
            note(f"removed its work dir {labels[WORK_DIR_LABEL]}")
    index = DirectoryIndex(cfg.index_dir)
    base_id = prepare_base(engine, cfg, note)
    if lock is not None:
        report.stages = build_locked_stages(engine, cfg, lock, image_stages(cfg),
                                            lambda s, e: note(f"stage {s}: {e}"), cfg.logs_dir / "images", base_id)
    else:
        report.stages = build_stages(engine, cfg, image_stages(cfg), lambda s, e: note(f"stage {s}: {e}"),
                                     cfg.logs_dir / "images", base_id)
    provenance = Provenance(images=(ImageRef("base-image", cfg.base.image, base_id),
                                    *(ImageRef(s.name, s.tag, s.image_id, s.key) for s in report.stages)))
    python_stage = report.stages[-1]
    report.jobs = choose_jobs(request.jobs or cfg.build.jobs, cfg.build.memory_per_job_gib)
    torch_outcome: StepOutcome | None = None
    torch_url = next((t.ref.url for t in targets if t.recipe == "torch" and t.ref), "") \
        or request.torch_repo or cfg.repos.torch
    for target in targets:
        recipe = get_recipe(target.recipe)
        step_started = time.time()
        if target.version:
            if recipe.name == "xla" and torch_outcome is not None:
                check_pair(torch_outcome.version, target.version)  # a built torch: checked before the fetch
            outcome = ensure_prebuilt(cfg, index, recipe, target.version, note)
        else:
            assert target.ref is not None
            dist, dist_jobs = plan_dist(cfg, recipe, request.jobs or cfg.build.jobs, note)
            requirements, deps = prepare_deps(engine, cfg, target.ref, python_stage, note, recipe.name, lock,
                                              (f"sccache=={cfg.toolchain.sccache}",) if dist else ())
            report.stages.append(deps)
            jobs, why = profile.memory_aware_jobs(choose_jobs, request.jobs or cfg.build.jobs,
                                                  cfg.build.memory_per_job_gib,
                                                  profile.latest(cfg.data_dir, recipe.project))
            if why and not dist:
                note(f"{recipe.project}: {why}")
            outcome = build_target(engine, cfg, index, recipe, target.ref, request,
                                   replace(report, jobs=dist_jobs or jobs), deps, torch_outcome, note, provenance,
                                   requirements, torch_url, progress, dist)
        note(f"{recipe.project}: {outcome.status} {outcome.filename}")
        report.timeline.append((recipe.project, step_started, time.time() - step_started, outcome.status))
        if outcome.replaced_corrupt:
            note(f"{recipe.project}: the published {outcome.filename} was corrupt (its bytes no longer matched "
                 "its manifest); replaced it with the rebuilt wheel")
        if target.ref is not None:  # a prebuilt wheel was fetched with its dependencies
            note(f"{recipe.project}: {fetch_dependencies(cfg, index, [outcome.filename], note, own_projects=built_projects())}")
        report.steps.append(outcome)
        if recipe.name == "torch":
            torch_outcome = outcome
    real_xla = xla_smoke.real_xla_wheels(index, report.steps) if request.smoke else None
    if real_xla:  # a real torch_xla: the lazy-execution check, figures into the report
        result = xla_smoke.smoke(engine, index, python_stage.tag, python_stage.image_id, real_xla,
                                 Path(cfg.data_dir), cfg.logs_dir, request.force_smoke, note=note)
        report.smoke, report.xla_smoke = result.status, result.as_dict()
        for outcome in report.steps:  # the figures travel with the torch_xla wheel
            if xla_smoke.is_real_torch_xla(index.files_dir / outcome.filename):
                index.annotate(outcome.filename, "xla_smoke", report.xla_smoke)
    elif request.smoke:
        report.smoke = run_smoke(engine, cfg, index, python_stage, report.steps, request.force_smoke)
    report.seconds = time.monotonic() - started
    report.trace = write_trace(cfg, report, time.time() - report.seconds)
    return report


def write_trace(cfg: Config, report: Report, run_started: float) -> Path:
    """``<logs>/trace.json`` (and a copy per run under logs/traces/): stages in order, the
    wheel steps, and each compiled step's translation units per ninja job slot."""
    stages, offset = [], 0.0
    for stage in report.stages:
        stages.append((f"{stage.name} {'reused' if stage.reused else 'built'}", offset, stage.seconds, stage.reused))
        offset += stage.seconds
    steps = [(label, start - run_started, seconds, status) for label, start, seconds, status in report.timeline]
    profiles = {}
    for outcome in report.steps:
        if outcome.profile is not None and outcome.profile.is_file():
            profiles[outcome.project] = (outcome.started - run_started, profile.load(outcome.profile))
    text = json.dumps(profile.trace_events(stages, steps, profiles))
    runs = cfg.logs_dir / "traces"
    runs.mkdir(parents=True, exist_ok=True)
    path = runs / f"trace-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(run_started))}.json"
    path.write_text(text)
    last = cfg.logs_dir / "trace.json"
    tmp = last.with_suffix(".json.tmp")
    tmp.write_text(text)
    tmp.replace(last)
    return path
