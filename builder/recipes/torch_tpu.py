"""TorchTPU (PyPI ``torch-tpu``), the successor of PyTorch/XLA: taken prebuilt, never built.

Followed (the wheel ``torch_tpu-0.2.0-cp311-cp311-manylinux_2_31_x86_64.whl`` from PyPI,
October 2026, and google-pytorch/torch_tpu's README):
- one cp311 wheel per release carrying a native glue per supported torch, picked at import
  by ``torch_tpu/_versioned_so_loader.py`` (the rule: builder.recipes.torch_tpu_pairing);
  METADATA ``Requires-Dist: torch>=2.11.0,<=2.15.0``, ``libtpu>=0.0.50`` and numpy, absl-py,
  portpicker, tensorboard, frozendict, immutabledict, pyzmq;
- ``entry_points.txt``: ``[torch.backends] torch_tpu = torch_tpu._loader:load``, so
  ``import torch`` loads it (torch's device-backend autoload);
- the wheel is built with Bazel (``--config=wheel_common``): builder does not drive that
  build, so a git ref is refused with that reason rather than resolved.

Pairing happens at planning time (``settle``): the asked version's wheel (the local
index's, else resolved with pip from ``[prebuilt]`` and downloaded into the download
cache, sha256 checked, where the later fetch finds it) must pair with the torch of the
request (a version, or a source build's version.txt / ``--torch-version``). ``latest``
walks the index's versions newest first (at most ``MAX_CANDIDATES``) and takes the first
that pairs. Before the fetch, the run checks the pair again against the torch wheel it
actually has (a source build's ``+git`` label included). The wheel is fetched without
its torch requirement, which the run's torch answers (``prebuilt_requires_built``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from builder.errors import BuildError, ConfigError, PackageIndexError
from builder.index.directory import DirectoryIndex
from builder.index.download import cached, default_cache_dir, download
from builder.index.prebuilt import find_prebuilt
from builder.index.resolve import Pin, Sources, resolve
from builder.index.wheelmeta import normalize_name, parse_filename
from builder.interpreter import Interpreter
from builder.recipes.base import NightlyOffer, PackageSource, PlanInputs, Recipe, SmokeRun, source_of
from builder.recipes.torch_tpu_pairing import (
    TpuWheel,
    dotted,
    in_range,
    pair,
    public,
    read_tpu_wheel,
    torch_requirement,
)
from builder.recipes.torch_tpu_smoke import SMOKE_CODE, smoke, tpu_wheels
from builder.recipes.xla_pins import torch_source_version
from builder.store import DownloadStore

MAX_CANDIDATES = 8  # versions `latest` (and a refusal's hint) looks at, newest first


@dataclass(frozen=True)
class Candidate:
    """One torch_tpu version the sources offer: in the local index, or resolved upstream."""

    version: str
    filename: str
    local: bool
    pin: Pin | None = None

    @property
    def requires(self) -> tuple[str, ...] | None:
        """Requires-Dist as pip read it without downloading the wheel (None: unknown yet)."""
        return self.pin.requires_dist if self.pin is not None and self.pin.requires_dist else None


class TorchTpuRecipe(Recipe):
    name = "torch_tpu"
    project = "torch_tpu"
    default_repo = "https://github.com/google-pytorch/torch_tpu.git"
    import_name = "torch_tpu"
    builds_against = ("torch",)
    flag = "tpu"
    flag_help = "TorchTPU version to fetch prebuilt, or latest (the newest that pairs with --torch)."
    prebuilt_only = ("its wheel is built with Bazel (google-pytorch/torch_tpu, --config=wheel_common), which "
                     "builder does not drive for TorchTPU yet")
    prebuilt_requires_built = True

    def plan_against(self, me: PackageSource, plan: PlanInputs) -> dict[str, PackageSource]:
        spec = plan.specs.get("torch")
        if spec is None:
            raise ConfigError(f"--tpu {me.version}: name the torch it runs with",
                              f"e.g. --torch 2.13.0 --tpu {me.version}")
        return {"torch": source_of("torch", spec, plan.repo_url("torch"))}

    def settle(self, me: PackageSource, plan: PlanInputs, against: dict[str, PackageSource]) -> PackageSource:
        torch = against["torch"]
        if torch.ref is None:
            version, where = torch.version, f"torch {torch.version}"
        else:
            version = plan.versions.get("torch") or torch_source_version(plan.mirrors, torch.ref) or ""
            if not version:
                raise ConfigError(f"cannot read the version of torch {torch.ref.ref} ({torch.ref.sha[:12]}): its "
                                  "version.txt is missing", "pass --torch-version X.Y.Z")
            where = f"torch {torch.ref.ref} ({torch.ref.sha[:12]}, version {version})"
        chosen, how = choose(plan.cfg, self.project, me.version, version, where)
        return replace(me, version=chosen, note=f"pairs with {where}: {how}")

    def check_against(self, me_version: str, against: dict[str, str], cfg=None) -> None:  # noqa: ANN001
        if cfg is None or "torch" not in against:
            return
        index = DirectoryIndex(cfg.index_dir)
        wheel = read_tpu_wheel(wheel_file(cfg, index, offered(cfg, index, self.project, me_version)))
        refuse_unless_paired(cfg, index, self.project, wheel, against["torch"], f"torch {against['torch']}")

    def own_smoke(self, run: SmokeRun) -> tuple[str, dict] | None:
        wheels = tpu_wheels(run.index, list(run.wheels))
        if not wheels:
            return None
        result = smoke(run, wheels)
        for name, _ in run.wheels:
            if normalize_name(parse_filename(name).name) == normalize_name(self.project):
                run.index.annotate(name, "torch_tpu_smoke", result)
        return ("reused" if result.get("reused") else "passed"), result

    def smoke_code(self) -> str:
        return SMOKE_CODE

    def nightly_offer(self, cfg, against: dict[str, str]) -> NightlyOffer | None:  # noqa: ANN001 - Config
        """Tonight's torch_tpu: the newest on offer that pairs with the nightly torch
        (``X.Y.Z.devDATE`` pairs by its release triple, as upstream's loader reads it), and
        every version on offer with the torch range its Requires-Dist names."""
        torch = against.get("torch", "")
        if not torch:
            return None
        index = DirectoryIndex(cfg.index_dir)
        offer = candidates(cfg, index, self.project)
        shown = tuple((c.version, supports(cfg, index, c)) for c in offer)
        found = newest_pairing(cfg, index, self.project, torch, offered=offer)
        if found is None:
            newest = f"; the newest, {shown[0][0]}, supports {shown[0][1]}" if shown else ""
            return NightlyOffer("", f"none on offer pairs with torch {torch}{newest}", shown)
        return NightlyOffer(found[0], f"pairs with torch {torch}: {found[1]}", shown)


# ------------------------------------------------------------------ finding the wheels
def sources_of(cfg) -> Sources:  # noqa: ANN001 - Config
    return Sources(cfg.prebuilt.index_url, tuple(cfg.prebuilt.find_links))


def _resolve(cfg, spec: str) -> Pin | None:  # noqa: ANN001 - Config
    """The newest file ``spec`` names in [prebuilt] for the python stage, without its
    dependencies (pip reads PEP 658 metadata; nothing is downloaded); None: there is none."""
    try:
        pins = resolve([spec], Interpreter.of(cfg), sources_of(cfg), False, cfg.logs_dir / "pairing-torch_tpu.log")
    except BuildError as exc:
        if "No matching distribution" in exc.message:
            return None
        raise
    return pins[0] if pins else None


def offered(cfg, index: DirectoryIndex, project: str, version: str) -> Candidate:  # noqa: ANN001
    """``project`` at ``version``: the local index's wheel, else the one [prebuilt] offers."""
    entry = find_prebuilt(index, project, version)
    if entry is not None:
        return Candidate(entry.version, entry.filename, True)
    pin = _resolve(cfg, f"{project}=={version}")
    if pin is None:
        raise ConfigError(f"no {project} {version} wheel for Python {Interpreter.of(cfg).series} in the local index or "
                          f"{sources_of(cfg).describe()}", f"see `builder index list`, or write --tpu latest "
                          f"(see {cfg.logs_dir / 'pairing-torch_tpu.log'})")
    return Candidate(pin.version, pin.filename, False, pin)


def candidates(cfg, index: DirectoryIndex, project: str) -> list[Candidate]:  # noqa: ANN001 - Config
    """The versions on offer, newest first: the local index's and [prebuilt]'s (one pip
    resolution per version, ``project<last``, so each one's tags are the python stage's)."""
    found: dict[Version, Candidate] = {}
    for entry in index.entries():
        if entry.normalized == normalize_name(project):
            found.setdefault(Version(entry.version), Candidate(entry.version, entry.filename, True))
    below = ""
    for _ in range(MAX_CANDIDATES):
        pin = _resolve(cfg, f"{project}<{below}" if below else project)
        if pin is None:
            break
        found.setdefault(Version(pin.version), Candidate(pin.version, pin.filename, False, pin))
        below = pin.version
    return [found[v] for v in sorted(found, reverse=True)][:MAX_CANDIDATES]


def wheel_file(cfg, index: DirectoryIndex, candidate: Candidate) -> Path:  # noqa: ANN001 - Config
    """The wheel on disk: the index's, or downloaded into the download cache (sha256
    checked against the page; the run's fetch takes it from there)."""
    if candidate.local:
        return index.files_dir / candidate.filename
    assert candidate.pin is not None
    store = DownloadStore(default_cache_dir(cfg.prebuilt.download_cache))
    found = cached(candidate.pin, store)
    return found if found is not None else download(candidate.pin, store).path


def read(cfg, index: DirectoryIndex, candidate: Candidate) -> TpuWheel:  # noqa: ANN001 - Config
    path = wheel_file(cfg, index, candidate)
    try:
        return read_tpu_wheel(path)
    except PackageIndexError as exc:
        where = candidate.pin.url if candidate.pin else f"the local index ({path})"
        raise PackageIndexError(f"torch_tpu {candidate.version} from {where}: {exc.message}",
                                "nothing was published; fix or remove that file upstream, or name another "
                                "--tpu version") from None


def supports(cfg, index: DirectoryIndex, candidate: Candidate) -> str:  # noqa: ANN001 - Config
    """The torch a candidate says it runs with (``torch<=2.15.0,>=2.11.0``): its Requires-Dist
    as pip read it, else (a local wheel) read from the wheel; "unreadable wheel" when neither."""
    requires = candidate.requires
    if requires is None:
        try:
            requires = read(cfg, index, candidate).requires
        except PackageIndexError:
            return "unreadable wheel"
    requirement = torch_requirement(requires)
    return f"torch{requirement}" if requirement else "any torch"


def newest_pairing(cfg, index: DirectoryIndex, project: str, torch_version: str,  # noqa: ANN001 - Config
                   skip: str = "", offered: list[Candidate] | None = None) -> tuple[str, str] | None:
    """(version, how) of the newest torch_tpu on offer (``offered``, else ``candidates``)
    that pairs with ``torch_version``. A wheel that cannot be read is passed over (and
    named in ``how``): asked for by its version, the same wheel is an error (``read``)."""
    unreadable = []
    for candidate in candidates(cfg, index, project) if offered is None else offered:
        if candidate.version == skip:
            continue
        requires = candidate.requires
        if requires is not None and not in_range(torch_version, torch_requirement(requires)):
            continue  # refused by its Requires-Dist alone: no download
        try:
            paired = pair(torch_version, read(cfg, index, candidate))
        except PackageIndexError:
            unreadable.append(candidate.version)
            continue
        if paired.ok:
            passed = f"; passed over {', '.join(unreadable)}: not a readable wheel" if unreadable else ""
            return candidate.version, paired.why + passed
    return None


def suggested_torch(wheel: TpuWheel) -> str:
    """A torch release the wheel runs with: its newest glue's, when its range admits it."""
    for glue in reversed(wheel.glues):
        if in_range(dotted(glue), wheel.torch_requirement):
            return dotted(glue)
    return ""


def refuse_unless_paired(cfg, index: DirectoryIndex, project: str, wheel: TpuWheel,  # noqa: ANN001 - Config
                         torch_version: str, where: str) -> str:
    """How ``wheel`` pairs with the torch, or a ConfigError naming what it supports and the
    newest torch_tpu that supports this torch."""
    paired = pair(torch_version, wheel)
    if paired.ok:
        return paired.why
    other = newest_pairing(cfg, index, project, torch_version, skip=wheel.version)
    torch = suggested_torch(wheel)
    hint = (f"torch_tpu {other[0]} is the newest that supports torch {public(torch_version)} (--tpu {other[0]})"
            if other else f"no torch_tpu in the local index or {sources_of(cfg).describe()} supports torch "
            f"{public(torch_version)}")
    raise ConfigError(f"torch_tpu {wheel.version} does not run with {where}: {paired.why}; it supports "
                      f"{wheel.supported()}", hint + (f"; or use --torch {torch}" if torch else ""))


def choose(cfg, project: str, spec: str, torch_version: str, where: str) -> tuple[str, str]:  # noqa: ANN001
    """(version, how it pairs) for ``--tpu spec`` with that torch; refused (exit 2) otherwise."""
    index = DirectoryIndex(cfg.index_dir)
    if spec != "latest":
        wheel = read(cfg, index, offered(cfg, index, project, spec))
        return wheel.version, refuse_unless_paired(cfg, index, project, wheel, torch_version, where)
    found = newest_pairing(cfg, index, project, torch_version)
    if found is None:
        raise ConfigError(f"--tpu latest: no torch_tpu in the local index or {sources_of(cfg).describe()} runs with "
                          f"{where}", "see the versions each supports with --tpu VERSION --dry-run, or use "
                          "another torch")
    return found[0], f"{found[1]} (latest: the newest that pairs)"
