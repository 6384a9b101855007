"""The recipe interface and the container script shared by all recipes."""

from __future__ import annotations

import itertools
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.errors import ConfigError
from builder.mounts import BAZEL_CACHE_MOUNT, CCACHE_MOUNT, INDEX_MOUNT, OUT_MOUNT, SOURCE_ROOT
from builder.source.refs import ResolvedRef, is_version, resolve_ref
from builder.source.sdist import Sdist
from builder.stages.installed import pip_from_local_index


@dataclass(frozen=True)
class PackageSource:
    """One package of a request, resolved: built from ``ref`` (a git SHA), or taken
    prebuilt at ``version`` (from the local index, else fetched into it)."""

    name: str  # recipe name
    ref: ResolvedRef | None = None
    version: str = ""
    # built from a package index's sdist (``ref``: its URL, the version, its sha256 for the SHA)
    sdist: Sdist | None = None
    # how a prebuilt version was chosen or pairs (a recipe's ``settle``), said in the plan
    note: str = field(default="", compare=False)

    def describe(self) -> str:
        if self.sdist is not None:
            return f"sdist {self.sdist.project} {self.sdist.version} (sha256 {self.sdist.sha256[:12]})"
        return f"prebuilt {self.version}" if self.ref is None else f"{self.ref.ref} = {self.ref.sha[:12]}"


@dataclass(frozen=True)
class PlanInputs:
    """What a recipe may consult when it decides the sources of what it builds against."""

    specs: dict[str, str | None]  # the request's spec (ref or version) per recipe name; None: not named
    repo_url: Callable[[str], str]  # recipe name -> git URL (the request's, else [repos], else the default)
    mirrors: Path  # git mirrors: files at a commit are read there, without a checkout
    unpinned: bool = False  # build against the named packages even where a commit pins others
    versions: dict[str, str] = field(default_factory=dict)  # explicit source-build versions per recipe
    notes: list[str] = field(default_factory=list)  # what a recipe says of its decisions (plan and summary)
    cfg: object = None  # builder.config.Config: where a recipe that reads prebuilt wheels finds them


@dataclass(frozen=True)
class SmokeRun:
    """What a recipe's own smoke may use: the run's wheels, the image, where records go."""

    engine: object  # builder.engine.Engine
    index: object  # builder.index.directory.DirectoryIndex
    image_tag: str
    image_id: str
    wheels: tuple[tuple[str, str], ...]  # (filename, sha256) of every wheel of the run
    data_dir: Path
    logs_dir: Path
    force: bool = False
    note: Callable[[str], None] | None = None


@dataclass(frozen=True)
class NightlyOffer:
    """What a nightly finds of a prebuilt-only package (``Recipe.nightly_offer``): the
    versions on offer, each with what it says it runs with, and the one that pairs with
    tonight's builds ("" when none does: the nightly builds the rest without it)."""

    picked: str
    why: str  # how it pairs, or why none does
    offered: tuple[tuple[str, str], ...] = ()  # (version, what it supports, e.g. "torch<=2.15.0,>=2.11.0")


@dataclass(frozen=True)
class BuildContext:
    """Per-build values a recipe turns into env and commands."""

    jobs: int
    source_date_epoch: int
    version: str = ""  # explicit wheel version (nightlies); empty: the source's own
    # what the build installs from the local index first: "project==version" of each
    # package this one builds against (its ``builds_against``), as built or found this run
    against: tuple[str, ...] = ()
    bazel_remote: str = ""
    cache_silo: str = "builder"
    extra_env: dict[str, str] = field(default_factory=dict)
    backend: str = ""  # the commit's PEP 517 build backend (builder.source.buildreqs)
    bazel_version: str = ""  # the commit's .bazelversion (bazelisk runs that Bazel)
    bazel_base_url: str = ""  # BAZELISK_BASE_URL: a mirror of Bazel releases
    dist_port: int = 0  # > 0: compiles go through sccache-dist (its local client daemon's port)
    plat: str = "auto"  # [wheels] plat: the platform policy the built wheel is audited and retagged to
    external_libs: str = "vendor"  # [wheels] external_libs: vendor | refuse


class Recipe:
    """One package's build. Subclasses set the names and override the hooks."""

    name: str = ""  # recipe name: --pkg NAME=REF, [repos] NAME, [packages.NAME]
    project: str = ""  # wheel project name
    default_repo: str = ""  # git URL of upstream's sources; [repos] NAME overrides it
    sdist: str = ""  # set: the source is this PyPI project's sdist (--pkg NAME=VERSION), not a git repository
    build_requires: tuple[str, ...] = ()  # build requirements besides the source's own
    import_name: str = ""  # module the smoke check imports
    compiler_launcher: bool = False  # its build honours CMAKE_<LANG>_COMPILER_LAUNCHER (ccache / sccache)
    # recipes whose wheels this build installs (from this run, else the index) and is keyed on;
    # the request builds them first (the package graph's edges)
    builds_against: tuple[str, ...] = ()
    # `builder wheels --NAME REF` (with --NAME-repo and --NAME-version) besides --pkg NAME=REF
    flag_help: str = ""
    flag: str = ""  # the option's name when it is not the recipe's (--tpu for torch_tpu)
    version_env: str = ""  # the env var a source build takes an explicit version from
    unpinned_help: str = ""  # set: `--NAME-unpinned`, for packages whose dependents' commits pin it
    nightly: bool = False  # built by `builder nightly` unless --pkg names the set
    pins_against: bool = False  # plan_against picks what it builds against from the commit (a nightly keeps it)
    example: str = ""  # a bundled example repo (builder.examples) shaped like upstream: `builder demo` builds it
    # set: only prebuilt versions (or ``latest``) of it exist for builder, and why (a git ref is refused with it)
    prebuilt_only: str = ""
    # its prebuilt wheel requires what this run builds (torch_tpu's torch range): the wheel is
    # fetched alone, then its other dependencies, so that part comes from the run, never upstream
    prebuilt_requires_built: bool = False
    # The disk one source build of it takes in data_dir, as (part, GiB) pairs the recipe
    # declares (builder.resources.estimate_disk sums them; a reused or prebuilt wheel needs
    # none). Empty: too small to count; [build] min_free_disk_gib is the floor either way.
    disk_gib: tuple[tuple[str, float], ...] = ()

    def repo_url(self, cfg) -> str:  # noqa: ANN001 - Config
        """The git URL of this package's sources: ``[repos] NAME`` (builder.toml,
        BUILDER_REPOS_<NAME>), else upstream's (``default_repo``)."""
        url = cfg.repos.get(self.name) or self.default_repo
        if not url:
            raise ConfigError(f"no repository for {self.name!r}",
                              f"set [repos] {self.name} = \"<git URL>\" in builder.toml")
        return url

    def plan_against(self, me: PackageSource, plan: PlanInputs) -> dict[str, PackageSource]:
        """The sources of the packages this one builds against, decided before anything is
        built: by default each one the request names (a version: prebuilt; a ref: resolved);
        one it does not name stays undecided (an error unless another package decides it).
        A recipe whose commits pin what they build against overrides this (xla's
        ``.torch_commit``), and checks that versions pair."""
        decided = {}
        for name in self.builds_against:
            spec = plan.specs.get(name)
            if spec is not None:
                decided[name] = source_of(name, spec, plan.repo_url(name))
        return decided

    def settle(self, me: PackageSource, plan: PlanInputs, against: dict[str, PackageSource]) -> PackageSource:
        """The prebuilt version this package takes once what it runs against is decided
        (``against``), refusing one that cannot pair; by default the one asked for."""
        return me

    def check_config(self, cfg) -> None:  # noqa: ANN001 - Config
        """Refuse settings that cannot work for this package, before anything is resolved."""

    def check_against(self, me_version: str, against: dict[str, str], cfg=None) -> None:  # noqa: ANN001 - Config
        """Refuse a prebuilt ``me_version`` that cannot run with the versions it is paired
        with (``against``: recipe name -> version), before it is fetched."""

    def version_for(self, me: PackageSource, plan: PlanInputs, against_sources: dict[str, str]) -> str:
        """An explicit wheel version for a source build (``against_sources``: recipe name ->
        the commit a built-against package came from); empty: the source's own."""
        return plan.versions.get(self.name, "")

    def layout_checkout(self, requirements) -> str:  # noqa: ANN001 - BuildRequirements
        """The recipe name whose source checkout this build must sit inside (xla inside
        torch's, as upstream's CI builds it); empty: a checkout of its own."""
        return ""

    def bazel_cache_dirs(self) -> tuple[str, ...]:
        """Dirs this build keeps in the Bazel cache volume (made writable for any build uid
        before it runs); empty: the build uses no Bazel cache."""
        return ()

    def bazel_user_dirs(self) -> tuple[str, ...]:
        """Dirs in the Bazel cache volume that each build uid fills with its own tree
        (Bazel's output user roots): made world-writable and sticky, never walked."""
        return ()

    def bazel_cache_layout(self) -> dict[str, str]:
        """What this build keeps in the Bazel cache volume, by name (`builder cache stats`)."""
        return {}

    def release_base(self, mirror: Path, sha: str) -> str:
        """The release number a nightly of this package dates (``X.Y.Z`` -> ``X.Y.Z.devDATE``);
        empty: it takes the number of the package it builds against."""
        return ""

    def nightly_offer(self, cfg, against: dict[str, str]) -> NightlyOffer | None:  # noqa: ANN001 - Config
        """For a prebuilt-only package of a nightly set: the versions on offer and the newest
        that pairs with tonight's ``against`` (recipe name -> dated version); None: a nightly
        has nothing to pick for it."""
        return None

    def commit_of_wheel(self, wheel: Path) -> str:
        """The source commit a wheel of this package records (for a prebuilt one); empty: unknown."""
        return ""

    def assemble_checkout(self, mirrors: Path, url: str, sha: str, wheel: Path, dest: Path):  # noqa: ANN201
        """The checkout of this package (at ``sha``, completed from its ``wheel``) that a
        dependent builds inside (``layout_checkout``); a SourceTree."""
        raise NotImplementedError(f"{self.name} provides no checkout for other builds")

    def explain_log(self, log_text: str, requirements, cfg) -> str | None:  # noqa: ANN001
        """A failed build's cause a user can act on, when this package's log shows one."""
        return None

    @property
    def source_dir(self) -> str:
        return f"{SOURCE_ROOT}/{self.name}"

    def env(self, ctx: BuildContext) -> dict[str, str]:
        """Environment of the build (all of it is recorded and keyed, but ``unkeyed_env``)."""
        raise NotImplementedError

    def audit_env(self, ctx: BuildContext) -> dict[str, str]:
        """The wheel audit's inputs (builder.repro.audit), as env: keyed and recorded, so
        `builder verify` repeats the audit the build had. A package built against torch
        leaves torch's libraries to the torch wheel (not vendored)."""
        return {"BUILDER_WHEEL_PLAT": ctx.plat, "BUILDER_EXTERNAL_LIBS": ctx.external_libs,
                "BUILDER_AUDIT_EXCLUDE": " ".join(TORCH_LIBRARIES if "torch" in self.builds_against else ())}

    def unkeyed_env(self) -> set[str]:
        """Variables that change speed, not output (e.g. job counts, cache dirs)."""
        return {"MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "CCACHE_DIR", "HOME", "BAZEL_JOBS", "SCCACHE_DIR",
                "SCCACHE_CONF", "SCCACHE_SERVER_PORT"}

    def prepare_lines(self, ctx: BuildContext) -> list[str]:
        """Shell lines run before the build. What it builds against is not among them: the
        container starts from a layer with those wheels installed (builder.stages.installed)."""
        return []

    def build_command(self, backend: str = "") -> list[str]:
        """PEP 517 through pypa/build, ``python -m build --wheel --no-isolation``: what
        pytorch/pytorch's .ci/manywheel/build_common.sh runs since the scikit-build-core
        migration (#189758); it drives a setuptools-era release and a scikit-build-core
        main alike. The build requirements are installed beforehand (the deps layer), so
        no isolated environment is made; the wheel lands in the mounted output dir."""
        return ["python", "-m", "build", "--wheel", "--no-isolation", "--outdir", f"{OUT_MOUNT}/dist",
                *self.config_settings(backend)]

    def config_settings(self, backend: str) -> list[str]:
        """PEP 517 config settings for ``backend``. scikit-build-core builds in a fresh
        temporary directory unless told otherwise; a fixed ``build/`` inside the checkout
        (a fixed path) keeps compile commands the same from build to build, which
        ccache's base_dir needs for hits (and a later profile reads .ninja_log there)."""
        if backend.startswith("scikit_build_core"):
            return ["-Cbuild-dir=build"]
        return []

    def smoke_code(self) -> str:
        raise NotImplementedError

    def own_smoke(self, run: SmokeRun) -> tuple[str, dict] | None:
        """A smoke of this package's own instead of the import smoke (xla's lazy-execution
        check on a real torch_xla): (status, figures), or None when it does not apply."""
        return None

    def script(self, ctx: BuildContext) -> str:
        """The whole container script: stats, prepare, build, stats. Values are quoted."""
        lines = [
            "set -eu",
            mark("started"),
            "umask 002",
            'mkdir -p "$HOME"',
            f"ccache --print-stats > {OUT_MOUNT}/ccache-before.tsv 2>/dev/null || true",
            *self.prepare_lines(ctx),
            f"cd {shlex.quote(self.source_dir)}",
            mark("prepared"),
            " ".join(shlex.quote(a) for a in self.build_command(ctx.backend)),
            mark("built"),
            *audit_lines(),
            mark("audited"),
            *normalize_lines(ctx.source_date_epoch),
            mark("normalised"),
            f"ccache --print-stats > {OUT_MOUNT}/ccache-after.tsv 2>/dev/null || true",
            *([f"sccache --show-stats --stats-format json > {OUT_MOUNT}/sccache-stats.json 2>/dev/null || true",
               "sccache --stop-server >/dev/null 2>&1 || true"] if ctx.dist_port else []),
            # the container's peak memory (cgroup v2, else v1): the next build's job count uses it
            "{ cat /sys/fs/cgroup/memory.peak || cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes; } "
            f"> {OUT_MOUNT}/memory-peak 2>/dev/null || true",
        ]
        return "\n".join(lines) + "\n"


# The shared libraries of the torch wheel an extension links (never vendored into it: the
# torch wheel brings them), as pytorch's ecosystem repairs its wheels: `auditwheel repair
# --exclude libtorch.so --exclude libtorch_cpu.so --exclude libtorch_python.so --exclude
# libc10.so ...` (e.g. pytorch/data packaging/post_build_script_linux.sh repairs with auditwheel).
# The globs also cover a CUDA or ROCm torch's (libtorch_cuda.so, libc10_cuda.so, libtorch_hip.so).
TORCH_LIBRARIES = ("libtorch*.so*", "libc10*.so*", "libshm*.so*")
RAW_DIR = f"{OUT_MOUNT}/raw"  # the wheel as the build made it, before the audit


def audit_lines() -> list[str]:
    """The build's wheel goes to raw/, the audit (builder.repro.audit, its source inlined:
    part of the script, so of the key) repairs or refuses it into dist/."""
    source = (Path(__file__).resolve().parent.parent / "repro" / "audit.py").read_text()
    return [f"mkdir -p {RAW_DIR} && mv {OUT_MOUNT}/dist/*.whl {RAW_DIR}/ 2>/dev/null || true",
            f"python - {RAW_DIR} {OUT_MOUNT}/dist {OUT_MOUNT} <<'BUILDER_AUDIT'\n{source}BUILDER_AUDIT"]


def normalize_lines(source_date_epoch: int) -> list[str]:
    """The audited wheel in dist/ rewritten in normal form (builder.repro.normalize, its
    source inlined like the audit's) by the image's pinned Python and zlib, not the host's."""
    source = (Path(__file__).resolve().parent.parent / "repro" / "normalize.py").read_text()
    return [f"python - {OUT_MOUNT}/dist {OUT_MOUNT} {int(source_date_epoch)} <<'BUILDER_NORMALIZE'\n"
            f"{source}BUILDER_NORMALIZE"]


MARKS_FILE = "marks.tsv"  # in OUT: "<name>\t<epoch seconds>" lines the build script writes


def mark(name: str) -> str:
    """A shell line recording when the script reached ``name`` (the host splits the
    container's time into start, prepare, build command and the rest from these)."""
    return f'printf "{name}\\t%s\\n" "$(date +%s.%N)" >> {OUT_MOUNT}/{MARKS_FILE}'


def container_phases(marks_text: str, entered: float, left: float) -> dict[str, float]:
    """Split a build container's wall time (``entered``..``left``, host epoch seconds) by
    the script's marks: "container start" (create, start, until the script's first line),
    "prepare" (stats, the recipe's prepare lines), "build command", "container end"
    (stats after, exit, removal). Missing or garbled marks leave one "container" phase."""
    at: dict[str, float] = {}
    for line in marks_text.splitlines():
        name, _, value = line.partition("\t")
        try:
            at[name] = float(value)
        except ValueError:
            continue
    # the audit and the normalisation are marked by scripts since their steps were added
    later = [(m, n) for m, n in (("audited", "audit"), ("normalised", "normalise")) if m in at]
    marks = ("started", "prepared", "built", *(m for m, _ in later))
    points = [entered, *(at.get(n, -1.0) for n in marks), left]
    if any(b < a for a, b in itertools.pairwise(points)):
        return {"container": max(left - entered, 0.0)}
    names = ("container start", "prepare", "build command", *(n for _, n in later), "container end")
    return {name: b - a for name, (a, b) in zip(names, itertools.pairwise(points), strict=True)}


def source_of(name: str, spec: str, url: str) -> PackageSource:
    """A version is prebuilt; anything else is a git ref resolved (``git ls-remote``) in ``url``."""
    return PackageSource(name, version=spec) if is_version(spec) else PackageSource(name, ref=resolve_ref(url, spec))


CCACHE_MASQUERADE = "$HOME/.ccache-bin"  # in the build's HOME (a fixed path): any uid can make it
MASQUERADED = ("gcc", "g++", "cc", "c++")


def ccache_masquerade_lines() -> list[str]:
    """Shell lines putting ccache in front of gcc, g++, cc and c++ for a build that has no
    compiler-launcher setting (torch.utils.cpp_extension): links named like the compilers,
    first on PATH; ccache runs the next one of that name on PATH, skipping its own links.
    The image's /usr/lib/ccache holds only gcc-12/g++-12 (ccache's postinst ran before
    gcc/g++ became alternatives), so the build makes its own."""
    links = " && ".join(f'ln -sf "$(command -v ccache)" "{CCACHE_MASQUERADE}/{name}"' for name in MASQUERADED)
    return [f'mkdir -p "{CCACHE_MASQUERADE}" && {links}', f'export PATH="{CCACHE_MASQUERADE}:$PATH"']


def marked_json(text: str, marker: str) -> Any:
    """The JSON a program printed after ``marker`` on its own line (the last valid one
    wins), or None: how the smoke programs and xla-check's runner hand figures back."""
    found = None
    for line in text.splitlines():
        at = line.find(marker)
        if at >= 0:
            try:
                found = json.loads(line[at + len(marker):])
            except ValueError:
                continue
    return found


__all__ = ["BuildContext", "PackageSource", "PlanInputs", "Recipe", "source_of", "CCACHE_MOUNT", "INDEX_MOUNT",
           "OUT_MOUNT", "BAZEL_CACHE_MOUNT", "SOURCE_ROOT", "pip_from_local_index", "ccache_masquerade_lines"]
