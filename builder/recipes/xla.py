"""PyTorch/XLA, built the way pytorch/xla's CI builds it.

Followed (pytorch/xla master 41398bf, April 2026):
- layout: xla is checked out at ``pytorch/xla`` inside a torch checkout; WORKSPACE takes
  torch from ``PYTORCH_LOCAL_DIR = "../"`` (bazel/dependencies.bzl) and bazel/torch.BUILD
  reads torch/include/**, build/lib/libtorch*.so and aten/.../native_functions.yaml there.
  builder assembles that checkout from the torch wheel and the torch source at its SHA
  (builder.recipes.xla_layout), so torch is never recompiled for xla.
- Bazel: bazelisk (the deps layer, as .circleci/common.sh installs it) runs the Bazel of
  ``.bazelversion`` (USE_BAZEL_VERSION); BAZELISK_HOME keeps the download on the Bazel
  cache volume; BAZELISK_BASE_URL points at a mirror when one is configured.
- ``build_util.py``'s ``bazel_options_from_env()``: BAZEL_JOBS (--jobs), SILO_NAME
  (cache-silo-key), BAZEL_DISK_CACHE_PATH (--disk_cache, pytorch/xla#9695), DEBUG,
  TPUVM_MODE, BAZEL_REMOTE_CACHE; the version from TORCH_XLA_VERSION (+git<sha> unless
  GIT_VERSIONED_XLA_BUILD=0); C++ tests from BUILD_CPP_TESTS. XLA_CUDA is gone (#9582).
- the compiler is .bazelrc's (``build --action_env=CC=gcc``): builder sets no CC/CXX,
  which Bazel would not read anyway under --incompatible_strict_action_env.
- an HTTP remote cache has no knob upstream (its remote_cache config names Google's
  grpcs:// service): that one line goes to ``~/.bazelrc``.
- Bazel keeps its work on the cache volume: upstream's setup.py runs ``bazel build
  TARGET`` plus build_util.py's flags and no startup option, so the output user root,
  the output base and the repository cache reach Bazel the one way it reads them, rc
  lines in ``~/.bazelrc`` (``bazel_cache_rc_lines``). Without them the output base is
  under the container's temporary $HOME and every build fetches OpenXLA, LLVM and the
  rest again and analyses from nothing.
- Bazel needs a user name ($USER, bazelbuild/bazel#16500): set for any uid.
"""

from __future__ import annotations

import re
import shlex

from builder.errors import ConfigError
from builder.recipes.base import (
    BAZEL_CACHE_MOUNT,
    SOURCE_ROOT,
    BuildContext,
    PackageSource,
    PlanInputs,
    Recipe,
    SmokeRun,
    source_of,
)
from builder.recipes.xla_pairing import check_config, check_pair
from builder.recipes.xla_pins import plan_pair, torch_source_version, unpinned_xla_version
from builder.recipes.xla_smoke import is_real_torch_xla, real_xla_wheels, smoke

TORCH_CHECKOUT = f"{SOURCE_ROOT}/pytorch"  # the torch checkout torch_xla builds inside (pytorch/xla's layout)
BAZEL_DISK_CACHE = f"{BAZEL_CACHE_MOUNT}/disk"
BAZELISK_HOME = f"{BAZEL_CACHE_MOUNT}/bazelisk"
# Downloads by sha256, shared by every build and uid (Bazel's repository cache is safe to share).
BAZEL_REPOSITORY_CACHE = f"{BAZEL_CACHE_MOUNT}/repos"
# Output user roots, one per build uid (as Bazel's default, ~/.cache/bazel/_bazel_$USER):
# uid-N/ holds the install base and the output bases base-0, base-1, ... (one per
# concurrent build: one Bazel server owns an output base at a time).
BAZEL_OUTPUT_ROOTS = f"{BAZEL_CACHE_MOUNT}/root"


def bazel_cache_rc_lines(roots: str = BAZEL_OUTPUT_ROOTS, repository_cache: str = BAZEL_REPOSITORY_CACHE,
                         rc: str = '"$HOME/.bazelrc"') -> list[str]:
    """Shell lines giving this build an output base of its own under ``roots`` and the
    shared repository cache, as ``~/.bazelrc`` lines (pure: unit tested).

    The output base is the first slot whose lock file this script can flock: the lock is
    held on fd 9 by the build's shell, so until the container ends; a concurrent build
    takes the next slot, and the next build after this one finds slot 0 free again, with
    the external repositories fetched and the action cache of the last build in it."""
    return [
        f"bazel_root={shlex.quote(roots)}/uid-$(id -u)",
        'mkdir -p "$bazel_root"',
        "bazel_slot=0",
        'while :; do exec 9>"$bazel_root/base-$bazel_slot.lock"; if flock -n 9; then break; fi; '
        "bazel_slot=$((bazel_slot + 1)); done",
        'echo "builder: Bazel output base $bazel_root/base-$bazel_slot, repository cache '
        f'{repository_cache}"',
        'printf "%s\\n" "startup --output_user_root=$bazel_root" "startup --output_base=$bazel_root/base-$bazel_slot" '
        f'"common --repository_cache={repository_cache}" >> {rc}',
    ]


class XlaRecipe(Recipe):
    name = "xla"
    project = "torch_xla"
    default_repo = "https://github.com/pytorch/xla.git"
    import_name = "torch_xla"
    builds_against = ("torch",)
    flag_help = "torch_xla ref to build, or a prebuilt version."
    version_env = "TORCH_XLA_VERSION"
    # frozen upstream (last release 2.9.0, master's last code change December 2025), and
    # xla master does not compile with torch main (C++17 vs C++20): `builder nightly --pkg
    # xla` builds master with the torch its .torch_commit pins
    nightly = False
    pins_against = True
    example = "fakexla"
    # Estimates (see README "Disk"): the xla work tree plus the torch checkout it builds in
    # (layout_checkout), and Bazel's trees: the output base with the external repositories
    # it downloads (openxla, LLVM, ...: "several GB", ../shared/UPSTREAM.md and issue #29),
    # the repository cache holding their archives, and the disk cache of actions.
    disk_gib = (("source + torch checkout", 5.0), ("bazel output base", 20.0),
                ("bazel repository cache", 3.0), ("bazel disk cache", 5.0))

    def check_config(self, cfg) -> None:  # noqa: ANN001 - Config
        check_config(cfg)

    def plan_against(self, me: PackageSource, plan: PlanInputs) -> dict[str, PackageSource]:
        """torch for this torch_xla: a prebuilt xla needs a named torch whose version pairs;
        a source xla builds against its ``.torch_commit`` unless --torch says otherwise
        (refused where it differs from the pin, unless unpinned): builder.recipes.xla_pins."""
        torch_url, spec = plan.repo_url("torch"), plan.specs.get("torch")
        if me.ref is None:
            if spec is None:
                raise ConfigError(f"--xla {me.version} is a prebuilt version: name its torch with --torch")
            torch = source_of("torch", spec, torch_url)
            if torch.ref is None:
                check_pair(spec, me.version)  # refused before anything is fetched or built
            else:  # a torch built from source: its version.txt (read from the mirror) must pair
                source = plan.versions.get("torch") or torch_source_version(plan.mirrors, torch.ref)
                if source:
                    check_pair(source, me.version, f"torch {spec} ({torch.ref.sha[:12]}, version {source})")
            return {"torch": torch}
        pair = plan_pair(plan.mirrors, me.ref, spec, torch_url, plan.unpinned, plan.versions.get("torch", ""),
                         plan.versions.get("xla", ""))
        plan.notes.extend(n for n in pair.notes if n not in plan.notes)
        return {"torch": PackageSource("torch", version=pair.torch_version) if pair.torch_ref is None
                else PackageSource("torch", ref=pair.torch_ref)}

    def check_against(self, me_version: str, against: dict[str, str], cfg=None) -> None:  # noqa: ANN001
        if "torch" in against:
            check_pair(against["torch"], me_version)

    def version_for(self, me: PackageSource, plan: PlanInputs, against_sources: dict[str, str]) -> str:
        if plan.versions.get("xla"):
            return plan.versions["xla"]
        torch_commit = against_sources.get("torch")
        if not torch_commit or me.ref is None:
            return ""
        # against another torch than its pin: a name of its own
        return unpinned_xla_version(plan.mirrors, me.ref, plan.repo_url("torch"), torch_commit)

    def layout_checkout(self, requirements) -> str:  # noqa: ANN001 - BuildRequirements
        # a Bazel workspace builds inside the torch checkout (WORKSPACE: PYTORCH_LOCAL_DIR "../")
        return "torch" if requirements.bazel_workspace else ""

    def bazel_cache_dirs(self) -> tuple[str, ...]:
        return (BAZEL_DISK_CACHE, BAZELISK_HOME, BAZEL_REPOSITORY_CACHE)

    def bazel_user_dirs(self) -> tuple[str, ...]:
        return (BAZEL_OUTPUT_ROOTS,)

    def bazel_cache_layout(self) -> dict[str, str]:
        return {"disk cache": BAZEL_DISK_CACHE, "repository cache": BAZEL_REPOSITORY_CACHE,
                "output user roots": BAZEL_OUTPUT_ROOTS, "bazelisk downloads": BAZELISK_HOME}

    def explain_log(self, log_text: str, requirements, cfg) -> str | None:  # noqa: ANN001
        return bazel_download_hint(log_text, requirements, cfg)

    @property
    def source_dir(self) -> str:
        return f"{TORCH_CHECKOUT}/xla"

    def env(self, ctx: BuildContext) -> dict[str, str]:
        env = {
            "BAZEL_JOBS": str(ctx.jobs),
            "BUILD_CPP_TESTS": "0",
            "SILO_NAME": ctx.cache_silo,
            "BAZEL_DISK_CACHE_PATH": BAZEL_DISK_CACHE,
            "USER": "builder",
            "SOURCE_DATE_EPOCH": str(ctx.source_date_epoch),
        }
        if ctx.bazel_version:
            env["USE_BAZEL_VERSION"] = ctx.bazel_version
            env["BAZELISK_HOME"] = BAZELISK_HOME
        else:
            # no Bazel: a plain torch C++ extension (torch.utils.cpp_extension), whose link step
            # would otherwise name Python's build-time x86_64-linux-gnu-g++, absent from the image
            env["CC"], env["CXX"] = "gcc", "g++"
        if ctx.bazel_base_url:
            env["BAZELISK_BASE_URL"] = ctx.bazel_base_url
        if ctx.version:
            env["TORCH_XLA_VERSION"] = ctx.version
            env["GIT_VERSIONED_XLA_BUILD"] = "0"
        env.update(ctx.extra_env)
        return env

    def unkeyed_env(self) -> set[str]:
        # Where caches and the Bazel download live (the Bazel version itself is keyed) and
        # who runs the build: speed, not output.
        return super().unkeyed_env() | {"BAZEL_DISK_CACHE_PATH", "BAZELISK_HOME", "BAZELISK_BASE_URL", "USER"}

    def bazelrc(self, ctx: BuildContext) -> str:
        if not ctx.bazel_remote:
            return ""
        # Upstream's .bazelrc sets --noremote_upload_local_results; without turning it
        # back on, the shared cache would be read but never filled.
        return f"build --remote_cache={ctx.bazel_remote}\nbuild --remote_upload_local_results\n"

    @staticmethod
    def remote_execution_bazelrc(executor: str, instance: str = "", jobs: int = 0) -> str:
        """The ~/.bazelrc lines that would run XLA's Bazel actions on a remote execution
        service (Buildbarn, NativeLink, BuildBuddy...: any REAPI endpoint). On paper only:
        no Bazel runs on builder's test machine (docs/bazel-remote-execution.md)."""
        if not executor.startswith(("grpc://", "grpcs://")):
            raise ValueError(f"a remote executor is a grpc:// or grpcs:// endpoint, not {executor!r}")
        lines = [f"build --remote_executor={executor}", "build --remote_upload_local_results",
                 "build --remote_download_toplevel",  # as upstream's remote_cache config
                 "build --spawn_strategy=remote,local",
                 "build --remote_timeout=3600"]
        if instance:
            lines.append(f"build --remote_instance_name={instance}")
        if jobs:
            lines.append(f"build --jobs={jobs}")  # remote slots, not local cores
        return "\n".join(lines) + "\n"

    def prepare_lines(self, ctx: BuildContext) -> list[str]:
        lines = [f"mkdir -p {BAZEL_DISK_CACHE} {BAZELISK_HOME} {BAZEL_REPOSITORY_CACHE}"]
        if ctx.bazel_version:  # a Bazel build (not a plain cpp extension): its own output base
            lines += bazel_cache_rc_lines()
        rc = self.bazelrc(ctx)
        if rc:
            lines.append(f'printf %s {shlex.quote(rc)} >> "$HOME/.bazelrc"')
        return lines + super().prepare_lines(ctx)

    def own_smoke(self, run: SmokeRun) -> tuple[str, dict] | None:
        """The lazy-execution check when the run holds a real torch_xla (builder.recipes.xla_smoke):
        one compile, no host syncs, no CPU fallbacks; its figures travel with the wheel."""
        wheels = real_xla_wheels(run.index, list(run.wheels))
        if not wheels:
            return None
        result = smoke(run.engine, run.index, run.image_tag, run.image_id, wheels, run.data_dir,
                       run.logs_dir, run.force, note=run.note)
        figures = result.as_dict()
        for name, _ in run.wheels:
            if is_real_torch_xla(run.index.files_dir / name):
                run.index.annotate(name, "xla_smoke", figures)
        return result.status, figures

    def smoke_code(self) -> str:
        return (
            "import torch, torch_xla\n"
            "print('torch', torch.__version__, 'torch_xla', torch_xla.__version__)\n"
            "if hasattr(torch_xla, 'add_via_torch'):\n"
            "    assert torch_xla.add_via_torch(2, 3) == 5, torch_xla.add_via_torch(2, 3)\n"
            "    print('torch_xla.add_via_torch(2, 3) == 5')\n"
        )


def bazel_download_hint(log_text: str, requirements, cfg) -> str | None:  # noqa: ANN001
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
