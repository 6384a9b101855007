"""`builder wheels`: resolve the package graph, plan every wheel, then execute the plan.

Resolution (builder.run.graph) checks every ref with ``git ls-remote`` before anything
else, so a typo costs one round trip. The plan (builder.run.wheelplan) says, before
any container runs, which wheels will be reused, built or taken prebuilt. Execution
brings the images up, then walks the plan in build order: each package builds against
the wheels of this run (or the index) it names in its recipe.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from builder.caches.volumes import (
    build_user,
    check_disk,
    give_tree_to,
    one_run_per_package,
    prepare_bazel_cache,
    prepare_ccache,
    record_last_build,
)
from builder.config import Config
from builder.console import Note
from builder.engine import Engine
from builder.errors import BuildError, NotEnoughDisk
from builder.index import prebuilt
from builder.index.deps import fetch_dependencies
from builder.index.directory import DirectoryIndex
from builder.recipes import built_projects, get_recipe
from builder.recipes.base import Recipe
from builder.report import profile
from builder.report.phases import Phases
from builder.report.trace import write_trace
from builder.repro.manifest import PROVENANCE_TOOLS, ImageRef, Provenance
from builder.resources import DiskEstimate, choose_jobs, estimate_disk, free_disk_gib
from builder.run.graph import Request, resolve
from builder.run.progress import StepProgress
from builder.run.reaper import reap
from builder.run.smoke import run_smokes
from builder.run.sources import check_out
from builder.run.wheelplan import (
    AFTER,
    Against,
    PlannedWheel,
    WheelPlan,
    dist_extra,
    plan_wheels,
    step_inputs,
)
from builder.run.wheelstep import StepOutcome, find_reusable, run_step
from builder.source.buildreqs import BuildRequirements, missing_module_hint
from builder.stages.images import Images, StageResult, bring_up, build_stages, remembered_banners
from builder.stages.plan import deps_stage
from builder.store import user_cache_dir


@dataclass
class RunReport:
    stages: list[StageResult] = field(default_factory=list)
    steps: list[StepOutcome] = field(default_factory=list)
    smoke: str = "skipped"
    smoke_figures: dict | None = None  # a recipe's own smoke's figures (xla's lazy-execution check)
    jobs: int = 0
    seconds: float = 0.0
    trace: Path | None = None  # Chrome trace of the run (builder.report.profile.trace_events)
    timeline: list[tuple[str, float, float, str]] = field(default_factory=list)  # steps: label, start, s, status
    plan: WheelPlan | None = None
    phases: Phases = field(default_factory=Phases)  # where the wall time went (builder.report.phases)


def plan_request(cfg: Config, request: Request, note: Note, engine: Engine | None) -> WheelPlan:
    """Resolve and plan; nothing is built (``--dry-run`` prints this)."""
    resolved = resolve(cfg, request)  # bad refs fail here, before any Docker call
    return plan_wheels(engine, cfg, resolved, DirectoryIndex(cfg.index_dir), note, request.jobs or cfg.build.jobs,
                       locked=bool(request.lock_file))


def plan_disk(cfg: Config, plan: WheelPlan) -> DiskEstimate:
    """The plan's disk estimate: the declared figures of each recipe it compiles."""
    where = Path(cfg.data_dir)
    return estimate_disk(((w.name, w.status, get_recipe(w.name, cfg).disk_gib) for w in plan.wheels),
                         cfg.build.disk_estimate_scale, cfg.build.min_free_disk_gib, free_disk_gib(where), str(where))


def check_plan_disk(disk: DiskEstimate) -> None:
    """Refuse a plan whose estimate is above the free space, before any image or build."""
    if not disk.enough:
        parts = ", ".join(f"{n} {g:.1f} GiB" for n, g in disk.packages)
        raise NotEnoughDisk(
            f"the plan needs {disk.total_gib:.1f} GiB free in {disk.where} ({parts or 'nothing compiled'}; "
            f"[build] min_free_disk_gib {disk.floor_gib:g}) but {disk.free_gib:.1f} GiB are free",
            "free some space, point data_dir at a larger disk, or lower [build] disk_estimate_scale "
            "if these builds are smaller than the recipes' figures")


def ensure_prebuilt(cfg: Config, index: DirectoryIndex, recipe: Recipe, version: str, note: Note) -> StepOutcome:
    started = time.monotonic()
    entry = prebuilt.ensure_prebuilt(cfg, index, recipe.project, version, note,
                                     own_projects=built_projects(cfg) if recipe.prebuilt_requires_built else None)
    return StepOutcome(recipe.name, recipe.project, "prebuilt", entry.filename, entry.version, entry.sha256,
                       seconds=time.monotonic() - started)


def prepare_deps(engine: Engine, cfg: Config, requirements: BuildRequirements, python_stage: StageResult,
                 note: Note, label: str, lock=None, extra: tuple[str, ...] = ()  # noqa: ANN001 - Lock
                 ) -> StageResult:
    """The deps layer holding a commit's build requirements, reused when another commit
    listed the same ones (with ``lock``: exactly the locked packages, installed with hashes)."""
    spec = deps_stage(cfg, requirements.requirements + extra, requirements.sources, requirements.bazel_version)
    report = lambda s, e: note(f"stage {s} ({label}): {e}")  # noqa: E731
    if lock is not None:
        from builder.repro.lock import build_locked_deps

        return build_locked_deps(engine, cfg, label, lock, spec, python_stage, report, cfg.logs_dir / "images")
    [stage] = build_stages(engine, cfg, [spec], report, cfg.logs_dir / "images", python_stage.image_id,
                           parent_ref=python_stage.tag)
    return stage


@dataclass(frozen=True)
class StepSetting:
    """How one package's step runs: on which deps image, with how many jobs, distributed or not."""

    deps: StageResult
    jobs: int
    dist: tuple[str, str] | None = None


def build_package(engine: Engine, cfg: Config, index: DirectoryIndex, planned: PlannedWheel, plan: WheelPlan,
                  setting: StepSetting, against: list[Against], note: Note, provenance: Provenance,
                  progress: StepProgress | None = None, phases: Phases | None = None) -> StepOutcome:
    """Reuse the wheel whose key is in the index, else check out and compile (one run per
    package and data dir at a time)."""
    with one_run_per_package(cfg, planned.name, note):
        return _build_package(engine, cfg, index, planned, plan, setting, against, note, provenance, progress,
                              phases or Phases())


def _build_package(engine: Engine, cfg: Config, index: DirectoryIndex, planned: PlannedWheel, plan: WheelPlan,
                   setting: StepSetting, against: list[Against], note: Note, provenance: Provenance,
                   progress: StepProgress | None, phases: Phases) -> StepOutcome:
    from builder.caches.dist import free_port

    recipe, ref, requirements = get_recipe(planned.name, cfg), planned.source.ref, planned.requirements
    assert ref is not None and requirements is not None
    with phases.time("wheel key"):
        inputs = step_inputs(cfg, recipe, planned.source, requirements, setting.deps.image_id, setting.deps.key,
                             against, plan.resolved.inputs, index, setting.jobs, free_port() if setting.dist else 0)
        reused = find_reusable(index, recipe, inputs.key, ref.sha)
    if reused is not None:
        return reused
    check_disk(Path(cfg.data_dir), cfg.build.min_free_disk_gib)
    note(f"{recipe.project}: {planned.source.describe()}, checking out ...")
    # The cache volumes are readied by containers while git checks out on the host: neither
    # needs the other, and only the volumes' thread talks to the engine meanwhile.
    with phases.time("checkout + cache volumes"), ThreadPoolExecutor(1) as pool:
        # the Bazel cache only for a recipe that builds with Bazel: a torch build neither
        # mounts nor creates it (an unused builder-bazel volume in the user's engine)
        preparing = pool.submit(lambda: prepare_ccache(
            engine, cfg, setting.deps.tag, index.root,
            prepare_bazel_cache(engine, cfg, setting.deps.tag, recipe.bazel_cache_dirs(), recipe.bazel_user_dirs())
            if recipe.bazel_cache_dirs() else ""))
        try:
            tree = check_out(cfg, recipe, planned.source)
        finally:
            mounts = preparing.result()  # a cache that cannot be readied is the error, as before
    checkout_tree = None
    if inputs.checkout:
        host = next(a for a in against if a.name == inputs.checkout)
        note(f"{recipe.project}: {host.project} checkout at {inputs.checkout_sha[:12]} with {host.filename}'s "
             f"headers and libraries (no {host.project} compile) ...")
        checkout_tree = get_recipe(inputs.checkout, cfg).assemble_checkout(
            Path(cfg.data_dir) / "mirrors", plan.resolved.inputs.repo_url(inputs.checkout), inputs.checkout_sha,
            index.files_dir / host.filename, Path(cfg.data_dir) / "src" / f"{inputs.checkout}-for-{recipe.name}")
    user = build_user(cfg)
    if user and os.geteuid() == 0:
        give_tree_to(tree.path, user)  # the build writes build/ inside the source
    with phases.time("compiler versions"):
        provenance = replace(provenance, ref=ref.ref, against_wheels=tuple(a.filename for a in against),
                             compilers=remembered_banners(engine, setting.deps.tag, setting.deps.image_id,
                                                               list(PROVENANCE_TOOLS), user_cache_dir() / "banners"))
    note(f"{recipe.project}: building in {setting.deps.tag} with {setting.jobs} jobs ...")
    log_path = cfg.logs_dir / "wheels" / f"{recipe.name}-{ref.sha[:12]}.log"
    try:
        outcome = run_step(
            engine, index, recipe, inputs.ctx, tree, inputs.key, setting.deps.tag, setting.deps.image_id, mounts,
            Path(cfg.data_dir) / "work", log_path, network=cfg.build.network,
            user=user, nano_cpus=int(cfg.build.cpu_limit * 1e9) or None,
            mem_limit=f"{int(cfg.build.memory_limit_gib * 1024)}m" if cfg.build.memory_limit_gib else None,
            against_sha256=",".join(a.sha256 for a in against), provenance=provenance, checkout_tree=checkout_tree,
            checkout_recipe=inputs.checkout,
            profiles_root=Path(cfg.data_dir), progress=progress, dist=setting.dist)
    except BuildError as exc:
        raise explain_failure(exc, log_path, recipe, ref.sha, requirements, cfg) from exc
    phases.merge(outcome.phases)
    record_last_build(cfg, outcome.recipe, outcome.filename, outcome.ccache)
    return outcome


def explain_failure(exc: BuildError, log_path: Path, recipe: Recipe, sha: str,
                    requirements: BuildRequirements | None, cfg: Config | None = None) -> BuildError:
    """The cause a user can act on, when the log shows one: the recipe's (a Bazel bazelisk
    could not download), else a missing build requirement."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return exc
    hint = recipe.explain_log(text, requirements, cfg)
    if hint is None and requirements:
        where = " and ".join(requirements.sources) if requirements.sources else "requirements-build.txt"
        hint = missing_module_hint(text, requirements, where)
    if hint is None:
        return exc
    return BuildError(f"building {recipe.project} from {sha[:12]} failed: {hint}", f"see the log {log_path}")


def run_wheels(cfg: Config, request: Request, note: Note, progress: StepProgress | None = None) -> RunReport:
    started = time.monotonic()
    report = RunReport()
    phases = report.phases
    with phases.time("resolve"):
        resolved = resolve(cfg, request)  # bad refs fail here, before any Docker call
    lock = None
    if request.lock_file:
        from builder.repro.lock import build_locked_stages, check_sources, check_wheels, load_lock

        lock = load_lock(request.lock_file)
        check_sources(lock, [(s.name, s.ref.url, s.ref.ref, s.ref.sha) for s in resolved.sources if s.ref])
        check_wheels(lock, cfg)
        from builder.repro.prebuilt_lock import check_prebuilt_version

        for s in resolved.sources:
            if s.ref is None:  # a prebuilt version: the locked one, before anything is fetched
                flag = get_recipe(s.name, cfg).flag or s.name
                check_prebuilt_version(lock, s.name, s.version, f"--{flag}")
    with phases.time("engine"):
        engine = Engine()
        reap(engine, cfg, note)
    index = DirectoryIndex(cfg.index_dir)
    requested_jobs = request.jobs or cfg.build.jobs
    # the plan, before any container runs
    with phases.time("plan"):
        report.plan = plan = plan_wheels(engine, cfg, resolved, index, note, requested_jobs,
                                         locked=lock is not None)
    for said in resolved.notes:
        note(said)
    check_plan_disk(plan_disk(cfg, plan))  # before any image, checkout or publish
    with phases.time("images"):
        images: Images = bring_up(engine, cfg, note, build=(
            (lambda e, c, specs, rep, logs, base: build_locked_stages(e, c, lock, specs, rep, logs, base))
            if lock is not None else None))
    report.stages = list(images.stages)
    provenance = Provenance(images=(ImageRef("base-image", cfg.base.image, images.base_id),
                                    *(ImageRef(s.name, s.tag, s.image_id, s.key) for s in report.stages)))
    report.jobs = choose_jobs(requested_jobs, cfg.build.memory_per_job_gib)
    outcomes: dict[str, StepOutcome] = {}
    for planned in plan.wheels:
        recipe = get_recipe(planned.name, cfg)
        step_started = time.time()
        against = [against_outcome(n, outcomes[n], get_recipe(n, cfg).project) for n in recipe.builds_against]
        if planned.source.ref is None:
            recipe.check_against(planned.source.version, {a.name: a.version for a in against}, cfg)  # before the fetch
            with phases.time("prebuilt"):
                outcome = ensure_prebuilt(cfg, index, recipe, planned.source.version, note)
            if lock is not None:  # what the fetch published is what the lock hashed
                from builder.repro.prebuilt_lock import check_prebuilt

                check_prebuilt(lock, recipe.name, index)
        else:
            dist, dist_jobs = planned.dist, planned.dist_jobs  # the scheduler was probed when planning
            with phases.time("deps layer"):
                deps = prepare_deps(engine, cfg, planned.requirements, images.python, note, recipe.name, lock,
                                    dist_extra(cfg, dist is not None))
            report.stages.append(deps)
            jobs, why = profile.memory_aware_jobs(choose_jobs, requested_jobs, cfg.build.memory_per_job_gib,
                                                  profile.latest(cfg.data_dir, recipe.project))
            if why and not dist:
                note(f"{recipe.project}: {why}")
            outcome = build_package(engine, cfg, index, planned, plan, StepSetting(deps, dist_jobs or jobs, dist),
                                    against, note, provenance, progress, phases)
        note(f"{recipe.project}: {outcome.status} {outcome.filename}")
        report.timeline.append((recipe.project, step_started, time.time() - step_started, outcome.status))
        if outcome.replaced_corrupt:
            note(f"{recipe.project}: the published {outcome.filename} was corrupt (its bytes no longer matched "
                 "its manifest); replaced it with the rebuilt wheel")
        if planned.source.ref is not None:  # a built wheel's run-time dependencies, into the index
            with phases.time("dependencies"):
                fetched = fetch_dependencies(cfg, index, [outcome.filename], note, own_projects=built_projects(cfg))
            note(f"{recipe.project}: {fetched}")
        report.steps.append(outcome)
        outcomes[planned.name] = outcome
    if request.smoke:
        with phases.time("smoke"):
            report.smoke, report.smoke_figures = run_smokes(engine, cfg, index, images.python, report.steps,
                                                        request.force_smoke, note)
    with phases.time("trace"):
        report.trace = write_trace(cfg, report, time.time() - (time.monotonic() - started))
    report.seconds = time.monotonic() - started
    return report


def against_outcome(name: str, outcome: StepOutcome, project: str) -> Against:
    return Against(name, project, outcome.version, outcome.sha256, outcome.filename, outcome.source_sha)


def planned_statuses_match(plan: WheelPlan, report: RunReport) -> list[str]:
    """Where the run did other than its plan said (empty: exactly as planned); ``after``
    may come out either way."""
    expected = {"reuse": {"reused"}, "build": {"built"}, "prebuilt": {"prebuilt"}, "fetch": {"prebuilt"},
                AFTER: {"built", "reused"}}
    done = {o.recipe: o.status for o in report.steps}
    return [f"{w.name}: planned {w.status}, was {done.get(w.name)}" for w in plan.wheels
            if done.get(w.name) not in expected[w.status]]
