"""torch / torch_xla version pairing: torch_xla X.Y.* is built for torch X.Y.*.

The torch_xla wheel on PyPI declares no torch requirement (2.9.0's METADATA has none),
so pip happily installs torch_xla 2.9.0 next to torch 2.13.0, and the mismatch shows up
later as an undefined symbol in ``_XLAC``. builder refuses such a pair before anything
is downloaded or built.

What upstream says (read with the search tool from stored copies of pytorch/xla):
- ``README.md`` installs the pair with the same version: ``pip install torch~=2.5.0
  torch_xla[tpu]~=2.5.0`` (2.5 era), ``pip install torch==2.8.0 'torch_xla[tpu]==2.8.0'``
  (2.8 era); the GPU plugin line likewise pins ``torch~=2.5.0 torch_xla~=2.5.0``.
- ``infra/tpu-pytorch-releases/artifacts.auto.tfvars`` (release builds): every
  ``versioned_builds`` entry builds xla ``git_tag = "vX.Y.Z"`` against
  ``pytorch_git_rev = "vX.Y.Z"`` (v2.1.0 ... v2.5.1), and ``artifacts_builds.tf`` (2.7)
  pairs ``release_git_tag = "v2.7.0-rc5"`` with ``release_pytorch_git_rev =
  "v2.7.0-rc10"``: release candidates and patch levels may differ, major.minor never
  does. Nightlies build xla master against pytorch ``main`` with the same X.Y.0.dev.
- ``setup.py`` (2.1-era copy) builds against whatever ``import torch`` finds and pins no
  torch version in ``install_requires``: the contract lives in the release process, not
  in the wheel, hence this module.

So the rule is: same major.minor (pre-release, dev and local labels ignored).
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from builder.errors import ConfigError
from builder.index.wheelmeta import normalize_name


def series(version: str) -> tuple[int, int]:
    """(major, minor) of a version: ``2.9.0+cpu`` -> (2, 9)."""
    try:
        release = Version(version).release
    except InvalidVersion:
        raise ConfigError(f"{version!r} is not a version") from None
    return release[0], (release[1] if len(release) > 1 else 0)


def matching_torch(xla_version: str) -> str:
    """The torch versions a torch_xla release is built for, as a specifier: ``2.9.*``."""
    major, minor = series(xla_version)
    return f"{major}.{minor}.*"


def pair_ok(torch_version: str, xla_version: str) -> bool:
    return series(torch_version) == series(xla_version)


def check_pair(torch_version: str, xla_version: str, where: str = "") -> None:
    """Refuse a torch / torch_xla pair whose major.minor differ, naming the match."""
    if pair_ok(torch_version, xla_version):
        return
    major, minor = series(xla_version)
    t_major, t_minor = series(torch_version)
    prefix = f"{where}: " if where else ""
    partner = (no_partner_reason(torch_version) or "") and (
        f"; torch_xla {LAST_XLA_RELEASE} is the last release (none exists for torch {t_major}.{t_minor})")
    raise ConfigError(
        f"{prefix}torch_xla {xla_version} is built for torch {matching_torch(xla_version)}, "
        f"not torch {torch_version}",
        f"use torch {major}.{minor}.0 (e.g. --torch {major}.{minor}.0)" + (partner or
        f", or a torch_xla {t_major}.{t_minor}.* for torch {torch_version}"))


def pinned_versions(requirements: Iterable[str]) -> dict[str, str]:
    """``{"torch": "2.9.0", "torch-xla": "2.9.0"}`` for requirements pinned with ``==``/``===``."""
    pins: dict[str, str] = {}
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        for spec in req.specifier:
            if spec.operator in ("==", "===") and not spec.version.endswith(".*"):
                pins[normalize_name(req.name)] = spec.version
    return pins


def check_requirements(requirements: Iterable[str], where: str = "") -> None:
    """The same check for a list of requirements (``builder index fetch`` specs, pins in
    builder.toml): when both torch and torch_xla are pinned, they must pair."""
    pins = pinned_versions(requirements)
    if "torch" in pins and "torch-xla" in pins:
        check_pair(pins["torch"], pins["torch-xla"], where)


def check_config(cfg) -> None:  # noqa: ANN001 - Config, imported lazily by callers
    """Pins in builder.toml. Today the only requirement lists are ``[python]
    requirements`` (build tools); checking them costs nothing and keeps a future
    ``torch==``/``torch_xla==`` pin there honest."""
    check_requirements(cfg.python.requirements, f"{cfg.source}: [python] requirements")


# --------------------------------------------------------------- source refs
# torch_xla 2.9.0 is the last release (pytorch/xla README, 2026-04-22: TorchTPU will
# replace PyTorch/XLA once public, RFC pytorch/xla#9684); master's last code change is
# from December 2025 and builds against the torch commit in .torch_commit.
LAST_XLA_RELEASE = "2.9.0"
TORCH_PIN_FILE = ".torch_commit"
# Where pytorch/xla's default version lives: setup.py (``os.getenv('TORCH_XLA_VERSION',
# '2.9.0')``) and, in the fixture, build_util.py.
XLA_VERSION_FILES = ("setup.py", "build_util.py")


# upstream CI labels both wheels with one value: vars.yaml's package_version, which
# infra/ansible/config/env.yaml passes as TORCH_XLA_VERSION and PYTORCH_BUILD_VERSION
CI_VERSION_FILE = "infra/ansible/config/vars.yaml"


def ci_package_version(text: str) -> str | None:
    """``package_version: 2.9.0`` of pytorch/xla's vars.yaml (pure; no YAML parser needed
    for one top-level scalar)."""
    import re

    match = re.search(r"""^package_version:\s*['"]?([^'"\s#]+)""", text or "", re.MULTILINE)
    return match.group(1) if match else None


def parse_torch_pin(text: str) -> str | None:
    """The torch ref of a ``.torch_commit``: its last line that is not a comment (a SHA on
    master, ``release/X.Y`` on release branches)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return lines[-1] if lines else None


def default_xla_version(texts: Iterable[str]) -> str | None:
    """The default TORCH_XLA_VERSION written in xla's build scripts, if one names it."""
    import re

    for text in texts:
        match = re.search(r"""(?:getenv|get)\(\s*['"]TORCH_XLA_VERSION['"]\s*,\s*['"]([^'"]+)['"]""", text)
        if match:
            return match.group(1)
    return None


def no_partner_reason(torch_version: str) -> str | None:
    """Why no torch_xla release exists for a torch newer than the last release's series."""
    if series(torch_version) <= series(LAST_XLA_RELEASE):
        return None
    return (f"no torch_xla exists for torch {torch_version}: torch_xla {LAST_XLA_RELEASE} (for torch "
            f"{matching_torch(LAST_XLA_RELEASE)}) is the last release, and PyTorch/XLA is to be replaced by "
            "TorchTPU (pytorch/xla#9684)")


def check_source_pair(torch_version: str, xla_version: str, where: str) -> None:
    """The X.Y rule for source refs (torch's version.txt, xla's default TORCH_XLA_VERSION)."""
    if pair_ok(torch_version, xla_version):
        return
    major, minor = series(xla_version)
    raise ConfigError(f"{where}: torch_xla {xla_version} is built for torch {matching_torch(xla_version)}, "
                      f"not torch {torch_version}",
                      f"build xla against torch {major}.{minor} (xla's {TORCH_PIN_FILE} names the commit it "
                      "pairs with), or pass --xla-version if this xla really targets another torch")
