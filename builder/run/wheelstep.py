"""One wheel step: compile a package in a container from its stage image, with caches.

Keyed by (stage image ID, source SHA + submodule SHAs, recipe env, torch wheel hash):
if the local index already holds a wheel whose manifest records that key, the step is
skipped. Otherwise the build runs in a container that is removed whatever happens, and
the wheel is published to the index atomically only after the build succeeded.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from builder import __version__
from builder.caches.ccache import CCACHE_MOUNT, CacheStats, parse_print_stats, stats_delta
from builder.caches.dist import parse_stats as parse_dist_stats
from builder.caches.dist import write_client_config
from builder.caches.volumes import StepMounts
from builder.engine import ContainerSpec, Engine, Mount
from builder.errors import BuildError
from builder.files import sha256_file
from builder.index.directory import DirectoryIndex
from builder.recipes.base import (
    BAZEL_CACHE_MOUNT,
    INDEX_MOUNT,
    MARKS_FILE,
    OUT_MOUNT,
    BuildContext,
    Recipe,
    container_phases,
)
from builder.report import profile
from builder.report.phases import Phases
from builder.repro import audit, normalize
from builder.repro.manifest import Provenance, StepRecord, build_manifest
from builder.repro.normalize import NORMALIZER_VERSION
from builder.run.progress import LogTee, StepProgress
from builder.source.mirror import SourceTree
from builder.stages.installed import ensure_installed

HOME = "/tmp/builder-home"


@dataclass
class StepOutcome:
    recipe: str
    project: str
    status: str  # built | reused | prebuilt
    filename: str
    version: str
    sha256: str
    key: str = ""
    seconds: float = 0.0
    ccache: CacheStats | None = None
    source_sha: str = ""
    log_path: Path | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0  # wall clock (time.time()) when the step began
    profile: Path | None = None  # builder.report.profile of a compile (ninja + ccache per unit)
    dist: dict[str, Any] = field(default_factory=dict)  # sccache-dist counts (builder.caches.dist.parse_stats)
    replaced_corrupt: bool = False  # the index held a corrupt copy of this wheel; replaced
    phases: dict[str, float] = field(default_factory=dict)  # the step's own (builder.report.phases)
    # the wheel's platform audit (builder.repro.audit): tag, policy, limited_by, vendored
    platform: dict[str, Any] = field(default_factory=dict)


def keyed_env(recipe: Recipe, env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items())
            if k not in recipe.unkeyed_env() and not k.startswith("CCACHE_")}


def wheel_key(recipe: Recipe, image_id: str, source_sha: str, env: dict[str, str], against_sha256: str = "",
              ctx: BuildContext | None = None, requirements: tuple[str, ...] = (), checkout_source: str = "") -> str:
    """The step's content key: the image, the source, the keyed env, the wheels it builds
    against and the checkout it builds inside (xla: torch's), the whole container script (all but the remote
    cache URL, which changes speed only), the wheel normalizer's version and the
    commit's build requirements. The submodule SHAs are gitlinks inside the commit's
    tree, so the source SHA already fixes them (and, recursively, theirs): the key can be
    computed before anything is checked out, which keeps a no-op rerun cheap."""
    ctx = ctx or BuildContext(jobs=0, source_date_epoch=0)
    payload = {
        "recipe": recipe.name,
        "image": image_id,
        "source": source_sha,
        "env": keyed_env(recipe, env),
        "against": against_sha256,
        "checkout": checkout_source,
        "script": recipe.script(replace(ctx, bazel_remote="", jobs=0)),
        "normalizer": NORMALIZER_VERSION,
        "requirements": list(requirements),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def container_env(recipe: Recipe, ctx: BuildContext) -> dict[str, str]:
    # CCACHE_STATSLOG: one record per compilation (hit/miss), read into the step's profile
    # the audit's first: a rebuild's recorded env (recipe.env's extra_env) overrides them
    return {**recipe.audit_env(ctx), **recipe.env(ctx), "CCACHE_DIR": CCACHE_MOUNT,
            "CCACHE_STATSLOG": f"{OUT_MOUNT}/ccache-stats.log",
            "HOME": HOME, "PYTHONDONTWRITEBYTECODE": "1"}


def find_reusable(index: DirectoryIndex, recipe: Recipe, key: str, source_sha: str) -> StepOutcome | None:
    existing = index.find_by_key(key)
    if existing is None:
        return None
    manifest = existing.manifest or {}
    return StepOutcome(recipe.name, recipe.project, "reused", existing.filename, existing.version,
                       existing.sha256, key, source_sha=source_sha, manifest=manifest,
                       platform=dict(manifest.get("platform") or {}))


WORK_DIR_LABEL = "builder.workdir"  # lets the next run remove this dir if we are SIGKILLed


def reaped_here(labels: dict[str, str], data_dir: Path) -> bool:
    """Whether a run in ``data_dir`` removes a dead run's container with ``labels``: yes
    unless the container names a work dir outside ``data_dir`` (another data dir's). That
    one is left to a run in its own data dir, which removes the container and the work dir
    together; removed from here, the work dir would stay on disk with nothing naming it."""
    labelled = labels.get(WORK_DIR_LABEL, "")
    return not labelled or Path(data_dir) in Path(labelled).parents


def remove_stale_work_dir(work_root: Path, labelled: str) -> bool:
    """Remove an interrupted run's work dir, only if it is a direct child of ``work_root``."""
    if not labelled:
        return False
    path = Path(labelled)
    if path.parent != work_root or not path.is_dir():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()


def run_step(engine: Engine, index: DirectoryIndex, recipe: Recipe, ctx: BuildContext, tree: SourceTree,
             key: str, image_tag: str, image_id: str, mounts: StepMounts, work_dir: Path, log_path: Path,
             network: str = "host", user: str | None = None, nano_cpus: int | None = None,
             mem_limit: str | None = None, against_sha256: str = "",
             provenance: Provenance | None = None, checkout_tree: SourceTree | None = None,
             profiles_root: Path | None = None, progress: StepProgress | None = None, checkout_recipe: str = "",
             dist: tuple[str, str] | None = None) -> StepOutcome:
    """Compile in a container and publish the wheel (the caller checked ``key`` is not built)."""
    env = {**container_env(recipe, ctx), **mounts.ccache_env}
    phases = Phases()
    started_wall = time.time()
    started = time.monotonic()
    work_dir.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix=f"{recipe.name}-", dir=work_dir))
    try:
        (out / "dist").mkdir()
        out.chmod(0o777)
        (out / "dist").chmod(0o777)
        if dist is not None:  # (scheduler, token): the token only ever in this 0600 file
            write_client_config(out, dist[0], dist[1], user)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as log, phases.time("against layer"):
            log.write(f"# {recipe.name} {tree.sha} key {key}\n# image {image_tag}\n")
            run_image = against_image(engine, index, image_tag, image_id, against_sha256, log)
        spec = ContainerSpec(
            image=run_image, command=["sh", "-c", recipe.script(ctx)], environment=env,
            mounts=[Mount(mounts.ccache, CCACHE_MOUNT, read_only=mounts.ccache_read_only),
                    *([Mount(mounts.bazel, BAZEL_CACHE_MOUNT)] if mounts.bazel else []),  # Bazel builds only
                    Mount(str(tree.path), recipe.source_dir), Mount(str(out), OUT_MOUNT),
                    Mount(str(index.root), INDEX_MOUNT, read_only=True),
                    # pytorch/xla's layout: xla (above) inside the torch checkout (builder.recipes.xla_layout)
                    *([Mount(str(checkout_tree.path), posixpath.dirname(recipe.source_dir), read_only=True)]
                      if checkout_tree else [])],
            workdir=recipe.source_dir, user=user, network=network, nano_cpus=nano_cpus, mem_limit=mem_limit,
            labels={"builder.step": recipe.name, "builder.key": key, WORK_DIR_LABEL: str(out)},
        )
        with log_path.open("a") as log:
            entered = time.time()
            result = engine.run(spec, LogTee(log, recipe.project, progress) if progress else log)
            left = time.time()
        marks = out / MARKS_FILE
        phases.merge(container_phases(marks.read_text() if marks.is_file() else "", entered, left))
        # the wheel audit said no (builder.repro.audit), or the wheel cannot be normalised
        refused = [f for f in (out / audit.ERROR_FILE, out / normalize.ERROR_FILE) if f.is_file()]
        if result.exit_code == audit.REFUSED_EXIT and refused:
            message, _, hint = refused[0].read_text().strip().partition("\n")
            raise BuildError(f"{recipe.project} from {tree.sha[:12]}: {message}", f"{hint}; the log: {log_path}")
        if result.exit_code != 0:
            raise BuildError(f"building {recipe.project} from {tree.sha[:12]} failed (exit {result.exit_code})",
                             f"see the log {log_path}")
        platform = _read_audit(out / audit.AUDIT_FILE)
        wheels = sorted((out / "dist").glob("*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"building {recipe.project} produced {len(wheels)} wheels, expected 1",
                             f"see the log {log_path}")
        stats = stats_delta(_read_stats(out / "ccache-before.tsv"), _read_stats(out / "ccache-after.tsv"))
        dist_stats = _read_dist(out / "sccache-stats.json") if dist is not None else {}
        with phases.time("normal form check"):  # the container rewrote it (same inputs -> same bytes)
            sha256, normalizer = checked_normal_form(out, wheels[0], ctx.source_date_epoch, log_path)
        manifest = build_manifest(StepRecord(
            wheel=wheels[0].name, sha256=sha256, build_key=key, recipe=recipe.name,
            command=recipe.build_command(ctx.backend), source_url=tree.url, source_sha=tree.sha,
            submodules=tree.submodules,
            commit_time=tree.commit_time, source_date_epoch=ctx.source_date_epoch, image_tag=image_tag,
            image_id=image_id, env=keyed_env(recipe, env), jobs=ctx.jobs, started=started_wall,
            finished=time.time(), ccache={**stats.as_dict(), **{k: v for k, v in dist_stats.items()
                                                                 if isinstance(v, int)}},
            builder_version=__version__, version=ctx.version,
            against=ctx.against, against_sha256=tuple(a for a in against_sha256.split(",") if a),
            checkout_recipe=checkout_recipe if checkout_tree else "",
            checkout_url=checkout_tree.url if checkout_tree else "",
            checkout_sha=checkout_tree.sha if checkout_tree else "", platform=platform,
            normalizer=normalizer), provenance)
        with phases.time("publish"):
            added = index.add(wheels[0], manifest)
            entry = next(e for e in index.entries() if e.filename == added.filename)
        profile_path = record_profile(profiles_root, recipe, added.filename, ctx.jobs, tree.path, out, dist_stats)
        return StepOutcome(recipe.name, recipe.project, "built", added.filename, entry.version, added.sha256,
                           key, time.monotonic() - started, stats, tree.sha, log_path, manifest,
                           started=started_wall, profile=profile_path, dist=dist_stats,
                           replaced_corrupt=added.status == "repaired", phases=phases.seconds, platform=platform)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def against_image(engine: Engine, index: DirectoryIndex, image_tag: str, image_id: str, against_sha256: str,
                  log) -> str:  # noqa: ANN001 - a text file
    """The image the step's container starts from: the stage image itself, or, for a build
    against other wheels (an extension against torch), the layer with those exact wheels
    installed (builder.stages.installed), made once per key."""
    shas = [a for a in against_sha256.split(",") if a]
    if not shas:
        return image_tag
    by_sha = {e.sha256: e.filename for e in index.entries()}
    missing = [s for s in shas if s not in by_sha]
    if missing:
        raise BuildError(f"the wheel with sha256 {missing[0][:12]}... it builds against is not in the index "
                         f"{index.root}", "run it again; `builder index check` lists what the index holds")
    installed = ensure_installed(engine, index.root, image_tag, image_id, [(by_sha[s], s) for s in shas], log)
    # a reused layer's install ran in another run's log: name what it holds here too
    log.write(f"# against layer {installed.tag} ({'reused' if installed.reused else 'made'}): "
              f"{', '.join(sorted(by_sha[s] for s in shas))}\n")
    return installed.tag


def record_profile(root: Path | None, recipe: Recipe, wheel: str, jobs: int, tree: Path, out: Path,
                   dist: dict[str, Any] | None = None) -> Path | None:
    """The step's profile from ninja's log in the build dir and ccache's stats log (none
    for a build without ninja, e.g. Bazel's)."""
    if root is None:
        return None
    try:
        ninja_log = (tree / "build" / ".ninja_log").read_text(errors="replace")
    except OSError:
        return None
    try:
        stats_log = (out / "ccache-stats.log").read_text(errors="replace")
    except OSError:
        stats_log = ""
    made = profile.make_profile(recipe.project, wheel, jobs, ninja_log, stats_log,
                                profile.latest(root, recipe.project))
    made.dist = dict(dist or {})
    try:
        made.peak_memory_bytes = int((out / "memory-peak").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return profile.save(root, made)


def checked_normal_form(out: Path, wheel: Path, source_date_epoch: int, log_path: Path) -> tuple[str, dict[str, str]]:
    """The wheel's sha256 and the Python and zlib that normalised it in the container
    (OUT/normalize.json), after checking from its central directory that it is in normal
    form and is the file the container hashed; a BuildError otherwise."""
    try:
        found = json.loads((out / normalize.NORMALIZE_FILE).read_text())
        sha256 = found["wheels"][wheel.name]["sha256"]
        runtime = {"version": str(found["version"]), "python": str(found["python"]), "zlib": str(found["zlib"])}
    except (OSError, ValueError, KeyError, TypeError):
        raise BuildError(f"{wheel.name}: the build container did not record its normalisation "
                         f"({normalize.NORMALIZE_FILE})", f"see the log {log_path}") from None
    problems = normalize.layout_problems(wheel, source_date_epoch)
    if problems:
        raise BuildError(f"{wheel.name} is not in normal form: {'; '.join(problems[:3])}",
                         f"see the log {log_path}")
    if sha256_file(wheel) != sha256:
        raise BuildError(f"{wheel.name} changed after the build container normalised it", f"see the log {log_path}")
    return sha256, runtime


def _read_audit(path: Path) -> dict[str, Any]:
    """What the audit recorded; a build image without the audit's output (none ran) gives {}."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    keep = ("tag", "policy", "limited_by", "vendored", "auditwheel")
    return {k: found[k] for k in keep if k in found} if isinstance(found, dict) else {}


def _read_dist(path: Path) -> dict[str, Any]:
    try:
        return parse_dist_stats(path.read_text())
    except OSError:
        return {}


def _read_stats(path: Path) -> dict[str, int]:
    try:
        return parse_print_stats(path.read_text())
    except OSError:
        return {}
