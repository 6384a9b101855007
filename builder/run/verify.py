"""`builder verify`: rebuild a published wheel from its manifest and compare the bytes.

The rebuild uses what the manifest records (source commit, build image ID, recipe env,
SOURCE_DATE_EPOCH, the torch wheel an XLA build used) and nothing that could hide a
difference: a fresh, empty ccache volume and Bazel cache (removed afterwards), no remote
caches, a fresh checkout at a new path, a scratch index. Equal sha256 means the wheel is
what its inputs make. Otherwise the report names the files inside the wheel that differ
(diffoscope's report too, when it is installed); the rebuilt wheel is kept for a look.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from builder.config import Config
from builder.console import Note
from builder.engine import Engine
from builder.errors import BuilderError
from builder.files import atomic_copy, sha256_file
from builder.index.directory import DirectoryIndex
from builder.recipes import BuildContext, built_projects, get_recipe
from builder.repro.manifest import Provenance, RebuildSpec, rebuild_spec
from builder.resources import choose_jobs
from builder.run.reaper import make_scratch_dir, verify_root
from builder.run.sources import check_out, recorded_source, source_requirements
from builder.run.wheelstep import container_env, keyed_env, run_step, wheel_key

DIFFOSCOPE_LINES = 80


class VerifyError(BuilderError):
    """A wheel cannot be verified (no manifest, image gone, torch wheel missing)."""


@dataclass
class VerifyResult:
    wheel: str
    recorded: str  # sha256 the manifest's subject names
    published: str  # sha256 of the file in the index now
    rebuilt: str = ""
    rebuilt_name: str = ""
    differences: list[str] = field(default_factory=list)
    diffoscope: str = ""
    kept: str = ""  # where the rebuilt wheel was kept (on a mismatch)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.recorded == self.published == self.rebuilt and self.rebuilt_name == self.wheel

    def summary(self) -> str:
        if self.ok:
            return f"{self.wheel}: reproduced (sha256 {self.rebuilt})"
        parts = []
        if self.published != self.recorded:
            parts.append(f"the published file (sha256 {self.published[:16]}) is not the one its manifest "
                         f"records ({self.recorded[:16]})")
        if self.rebuilt_name and self.rebuilt_name != self.wheel:
            parts.append(f"the rebuild is named {self.rebuilt_name}")
        if self.rebuilt and self.rebuilt != self.recorded:
            parts.append(f"the rebuild's sha256 is {self.rebuilt[:16]}, the manifest records {self.recorded[:16]}")
        return f"{self.wheel}: NOT reproduced: " + "; ".join(parts or self.notes)

    def as_dict(self) -> dict[str, object]:
        return {"wheel": self.wheel, "ok": self.ok, "recorded": self.recorded, "published": self.published,
                "rebuilt": self.rebuilt, "differences": self.differences, "kept": self.kept, "notes": self.notes}


# ------------------------------------------------------------------ comparing (pure)
def entry_digests(wheel: Path) -> tuple[dict[str, str], dict[str, tuple[object, ...]]]:
    """({name: sha256 of the content, or "unreadable: why"}, {name: zip metadata}).

    A damaged entry (a flipped byte fails its CRC) is reported, not raised: naming it is
    the point. A file whose zip directory itself is unreadable yields one pseudo-entry.
    """
    digests: dict[str, str] = {}
    meta: dict[str, tuple[object, ...]] = {}
    try:
        with zipfile.ZipFile(wheel) as zf:
            for position, info in enumerate(zf.infolist()):
                meta[info.filename] = (position, info.date_time, info.external_attr >> 16, info.compress_type)
                try:
                    digests[info.filename] = hashlib.sha256(zf.read(info)).hexdigest()
                except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError) as exc:
                    digests[info.filename] = f"unreadable: {exc}"
    except (zipfile.BadZipFile, OSError) as exc:
        digests["<zip directory>"] = f"unreadable: {exc}"
    return digests, meta


def diff_wheels(published: Path, rebuilt: Path) -> list[str]:
    """Which files inside the two wheels differ, one line each ([] when all equal)."""
    a, a_meta = entry_digests(published)
    b, b_meta = entry_digests(rebuilt)
    lines = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            lines.append(f"{name}: only in the published wheel")
        elif name not in a:
            lines.append(f"{name}: only in the rebuilt wheel")
        elif a[name] != b[name]:
            lines.append(f"{name}: content differs (published {a[name][:64]}, rebuilt {b[name][:64]})")
    if not lines:
        lines += [f"{name}: zip metadata differs (order, time, mode, compression: {a_meta[name]} vs {b_meta[name]})"
                  for name in sorted(a_meta) if a_meta[name] != b_meta.get(name)]
    if not lines and sha256_file(published) != sha256_file(rebuilt):
        lines.append("<zip container>: every entry is equal; the archive framing differs")
    return lines


def run_diffoscope(published: Path, rebuilt: Path) -> str:
    """diffoscope's text report (first lines), or "" when it is not installed."""
    tool = shutil.which("diffoscope")
    if tool is None:
        return ""
    try:
        done = subprocess.run([tool, "--no-progress", "--text", "-", str(published), str(rebuilt)],
                              capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return "diffoscope timed out"
    return "\n".join(done.stdout.splitlines()[:DIFFOSCOPE_LINES])


# ------------------------------------------------------------------ rebuilding
def _context(spec: RebuildSpec, jobs: int) -> BuildContext:
    # The recorded (keyed) env goes in as extra_env, which every recipe applies last: the
    # rebuild runs with exactly the recorded values, whatever this builder's defaults are.
    return BuildContext(jobs=jobs, source_date_epoch=spec.source_date_epoch, version=spec.version,
                        against=spec.against, bazel_remote="",
                        cache_silo=spec.env.get("SILO_NAME", "builder"), extra_env=dict(spec.env),
                        # a wheel from before the audit (no BUILDER_WHEEL_PLAT recorded) kept its build's tag
                        plat=spec.env.get("BUILDER_WHEEL_PLAT", "linux"),
                        external_libs=spec.env.get("BUILDER_EXTERNAL_LIBS", "vendor"))


def verify_wheel(engine: Engine, cfg: Config, index: DirectoryIndex, wheel: str, note: Note,
                 jobs: int = 0) -> VerifyResult:
    """Rebuild ``wheel`` (a file name in ``index``) from its manifest with empty caches."""
    from builder.caches.volumes import build_user, give_tree_to, prepare_ccache

    manifest = index.manifest(wheel)
    if manifest is None:
        raise VerifyError(f"{wheel} has no manifest (imported, not built here): nothing to rebuild from")
    spec = rebuild_spec(manifest)
    if spec.wheel != wheel:
        raise VerifyError(f"the manifest of {wheel} describes {spec.wheel}")
    result = VerifyResult(wheel, spec.sha256, sha256_file(index.files_dir / wheel))
    if spec.redacted_env:
        result.notes.append(f"secret-looking variables were not recorded: {', '.join(spec.redacted_env)}")
    if engine.image_id(spec.image_tag) != spec.image_id and engine.image_id(spec.image_id) is None:
        raise VerifyError(f"the build image {spec.image_tag} ({spec.image_id[:19]}) is no longer present",
                          "rebuild the stage images with `builder wheels --locked` (same packages) first")
    recipe = get_recipe(spec.recipe, cfg)
    source = recorded_source(cfg, recipe, spec.source_url, spec.source_sha)  # a commit, or an sdist
    requirements = source_requirements(cfg, recipe, source)  # as the build read them (with the recipe's own)
    ctx = replace(_context(spec, choose_jobs(jobs or cfg.build.jobs, cfg.build.memory_per_job_gib)),
                  backend=requirements.backend, bazel_version=requirements.bazel_version,
                  bazel_base_url=cfg.bazel.base_url)
    env = container_env(recipe, ctx)
    key = wheel_key(recipe, spec.image_id, spec.source_sha, env, ",".join(spec.against_sha256), ctx,
                    requirements.requirements, spec.checkout_sha)
    if key != spec.build_key:
        result.notes.append(f"the rebuild's key {key} differs from the recorded {spec.build_key} "
                            "(another builder version's recipe?)")
    if keyed_env(recipe, env) != {**spec.env}:
        result.notes.append("the rebuild's environment differs from the recorded one")
    volume = f"builder-verify-{uuid.uuid4().hex[:12]}"
    scratch_root = verify_root(cfg.data_dir)
    scratch = make_scratch_dir(scratch_root)  # with the volumes, removed by the next run if we are SIGKILLed
    try:
        engine.ensure_volume(volume, scratch_of=str(cfg.data_dir))
        engine.ensure_volume(f"{volume}-bazel", scratch_of=str(cfg.data_dir))
        scratch_index = DirectoryIndex(scratch / "index")
        installed = {}  # project -> the wheel the build installed first, found again by its sha256
        for requirement, sha in zip(spec.against, spec.against_sha256, strict=False):
            entry = next((e for e in index.entries() if e.sha256 == sha), None)
            if entry is None:
                raise VerifyError(f"the wheel {requirement} ({sha[:16]}) this build installed is not in {index.root}")
            scratch_index.add(index.files_dir / entry.filename)
            installed[entry.normalized] = entry
        # what those wheels need at run time (a prebuilt torch's filelock, sympy...): pip
        # installs them with it, from the index alone; wheels builder builds are not copied
        own = {canonicalize_name(p) for p in built_projects(cfg)}
        for entry in index.entries():
            if entry.normalized not in own and entry.normalized not in installed:
                scratch_index.add(index.files_dir / entry.filename)
        fresh = cfg.replace(cache=replace(cfg.cache, ccache=f"volume:{volume}", ccache_remote="",
                                          ccache_read_only=False, bazel=f"volume:{volume}-bazel", bazel_remote=""))
        mounts = prepare_ccache(engine, fresh, spec.image_tag, scratch_index.root, f"{volume}-bazel")
        note(f"{wheel}: checking out {spec.source_sha[:12]} into {scratch} ...")
        tree = check_out(cfg, recipe, source, scratch / "src" / recipe.name)
        checkout_tree = None
        if spec.checkout_sha:  # built inside another package's checkout (xla in torch's): assembled again
            host = get_recipe(spec.checkout_recipe, cfg)
            wheel_of_host = installed[canonicalize_name(host.project)]
            checkout_tree = host.assemble_checkout(Path(cfg.data_dir) / "mirrors", spec.checkout_url,
                                                   spec.checkout_sha, scratch_index.files_dir / wheel_of_host.filename,
                                                   scratch / "src" / f"{spec.checkout_recipe}-for-{recipe.name}")
        user = build_user(cfg)
        if user and os.geteuid() == 0:
            give_tree_to(tree.path, user)  # the build writes build/ inside the source
        note(f"{wheel}: rebuilding in {spec.image_tag} with empty caches ({ctx.jobs} jobs) ...")
        outcome = run_step(
            engine, scratch_index, recipe, ctx, tree, key, spec.image_tag, spec.image_id, mounts, scratch / "work",
            cfg.logs_dir / "verify" / f"{wheel}.log", network=cfg.build.network, user=user,
            nano_cpus=int(cfg.build.cpu_limit * 1e9) or None,
            mem_limit=f"{int(cfg.build.memory_limit_gib * 1024)}m" if cfg.build.memory_limit_gib else None,
            against_sha256=",".join(spec.against_sha256), provenance=Provenance(ref="verify"),
            checkout_tree=checkout_tree, checkout_recipe=spec.checkout_recipe)
        rebuilt = scratch_index.files_dir / outcome.filename
        result.rebuilt, result.rebuilt_name = outcome.sha256, outcome.filename
        if not result.ok:
            published = index.files_dir / wheel
            result.differences = diff_wheels(published, rebuilt)
            result.diffoscope = run_diffoscope(published, rebuilt)
            kept = scratch_root / "rebuilt" / outcome.filename
            kept.parent.mkdir(parents=True, exist_ok=True)
            atomic_copy(rebuilt, kept)  # two verifies of one wheel never interleave their bytes
            result.kept = str(kept)
        return result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        engine.remove_volume(volume)
        engine.remove_volume(f"{volume}-bazel")


def verify_all(engine: Engine, cfg: Config, index: DirectoryIndex, note: Note, jobs: int = 0
               ) -> tuple[list[VerifyResult], list[str]]:
    """Verify every wheel that has a provenance manifest; (results, skipped file names)."""
    results, skipped = [], []
    for entry in index.entries():
        if not entry.manifest or "predicate" not in entry.manifest:
            skipped.append(entry.filename)
            continue
        try:
            results.append(verify_wheel(engine, cfg, index, entry.filename, note, jobs))
        except BuilderError as exc:
            result = VerifyResult(entry.filename, "", "")
            result.notes.append(f"rebuild failed: {exc}")
            results.append(result)
    return results, skipped
