"""The recipe interface and the container script shared by all recipes."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from builder.errors import ConfigError
from builder.mounts import BAZEL_CACHE_MOUNT, CCACHE_MOUNT, INDEX_MOUNT, OUT_MOUNT, SOURCE_ROOT, TORCH_CHECKOUT


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


class Recipe:
    """One package's build. Subclasses set the names and override the hooks."""

    name: str = ""  # recipe name: --pkg NAME=REF, [repos] NAME, [packages.NAME]
    project: str = ""  # wheel project name
    default_repo: str = ""  # git URL of upstream's sources; [repos] NAME overrides it
    import_name: str = ""  # module the smoke check imports
    compiler_launcher: bool = False  # its build honours CMAKE_<LANG>_COMPILER_LAUNCHER (ccache / sccache)
    # recipes whose wheels this build installs (from this run, else the index) and is keyed on;
    # the request builds them first (the package graph's edges)
    builds_against: tuple[str, ...] = ()

    def repo_url(self, cfg) -> str:  # noqa: ANN001 - Config
        """The git URL of this package's sources: ``[repos] NAME`` (builder.toml,
        BUILDER_REPOS_<NAME>), else upstream's (``default_repo``)."""
        url = cfg.repos.get(self.name) or self.default_repo
        if not url:
            raise ConfigError(f"no repository for {self.name!r}",
                              f"set [repos] {self.name} = \"<git URL>\" in builder.toml")
        return url

    def pins(self, read: Callable[[str], str | None]) -> dict[str, str]:
        """Refs a commit pins for the packages it builds against, read with ``read(path)``
        from the commit (None: no such file); the plan builds those unless told otherwise."""
        return {}

    def explain_log(self, log_text: str, requirements, cfg) -> str | None:  # noqa: ANN001
        """A failed build's cause a user can act on, when this package's log shows one."""
        return None

    @property
    def source_dir(self) -> str:
        return f"{SOURCE_ROOT}/{self.name}"

    def env(self, ctx: BuildContext) -> dict[str, str]:
        """Environment of the build (all of it is recorded and keyed, but ``unkeyed_env``)."""
        raise NotImplementedError

    def unkeyed_env(self) -> set[str]:
        """Variables that change speed, not output (e.g. job counts, cache dirs)."""
        return {"MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "CCACHE_DIR", "HOME", "BAZEL_JOBS", "SCCACHE_DIR",
                "SCCACHE_CONF", "SCCACHE_SERVER_PORT"}

    def prepare_lines(self, ctx: BuildContext) -> list[str]:
        """Shell lines run before the build: what it builds against, installed from the local
        index alone. ``--target``: works for any uid (the image's venv belongs to root); the
        build then imports it through PYTHONPATH."""
        if not ctx.against:
            return []
        return [pip_from_local_index(*ctx.against, target_home_dir="site"), 'export PYTHONPATH="$HOME/site"']

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

    def script(self, ctx: BuildContext) -> str:
        """The whole container script: stats, prepare, build, stats. Values are quoted."""
        lines = [
            "set -eu",
            "umask 002",
            'mkdir -p "$HOME"',
            f"ccache --print-stats > {OUT_MOUNT}/ccache-before.tsv 2>/dev/null || true",
            *self.prepare_lines(ctx),
            f"cd {shlex.quote(self.source_dir)}",
            " ".join(shlex.quote(a) for a in self.build_command(ctx.backend)),
            f"ccache --print-stats > {OUT_MOUNT}/ccache-after.tsv 2>/dev/null || true",
            *([f"sccache --show-stats --stats-format json > {OUT_MOUNT}/sccache-stats.json 2>/dev/null || true",
               "sccache --stop-server >/dev/null 2>&1 || true"] if ctx.dist_port else []),
            # the container's peak memory (cgroup v2, else v1): the next build's job count uses it
            "{ cat /sys/fs/cgroup/memory.peak || cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes; } "
            f"> {OUT_MOUNT}/memory-peak 2>/dev/null || true",
        ]
        return "\n".join(lines) + "\n"


def pip_from_local_index(*requirements: str, target_home_dir: str = "") -> str:
    """Install ``requirement`` from the mounted local index only: the machine's pip config,
    find-links and mirrors are switched off, so nothing else can answer."""
    return (f"PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_EXTRA_INDEX_URL= pip install --no-cache-dir "
            f"--disable-pip-version-check --index-url file://{INDEX_MOUNT}/simple/ "
            + (f'--target "$HOME"/{shlex.quote(target_home_dir)} ' if target_home_dir else "")
            + " ".join(shlex.quote(r) for r in requirements))


__all__ = ["BuildContext", "Recipe", "CCACHE_MOUNT", "INDEX_MOUNT", "OUT_MOUNT", "BAZEL_CACHE_MOUNT", "TORCH_CHECKOUT",
           "pip_from_local_index"]
