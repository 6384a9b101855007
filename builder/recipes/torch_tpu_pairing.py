"""torch / TorchTPU pairing, read from the torch_tpu wheel itself.

A torch_tpu wheel runs with a torch when both hold:

1. its METADATA's ``Requires-Dist`` on torch admits the torch's public version
   (torch_tpu 0.2.0: ``torch>=2.11.0,<=2.15.0``); a local label (``2.13.0+cpu``,
   ``2.13.0+git1a2b3c4``) is dropped, pre-releases count, as pip compares them;
2. the wheel carries a native glue for that torch, chosen by upstream's own rule.

The rule is upstream's ``torch_tpu/_versioned_so_loader.py`` (read from PyPI's
``torch_tpu-0.2.0-cp311-cp311-manylinux_2_31_x86_64.whl``): a glue is any ``*.so``
under the package whose name ends in ``_<major>_<minor>_<patch>.so``
(``env_2_13_0.so``; ``libpywrap_2_13_0_common.so`` is not one); the torch version is
cut to its release triple (``2.13.0+cpu``, ``2.13.0a0+git...``, ``2.13.0.dev2026...``
-> ``2_13_0``; an unparsable version selects nothing); the loader takes **the newest
glue whose triple is <= the torch's** (a glue is added only when a torch release breaks
the ABI, so it serves every release up to the next glue). A torch older than every glue
gets an ImportError at ``import torch_tpu``; builder refuses it before anything is
fetched. The wheel of 0.2.0 has one glue set per torch 2.11.0 ... 2.15.0.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from builder.index.wheelmeta import normalize_name, parse_filename, read_metadata, unreadable_wheel

PACKAGE = "torch_tpu/"
ENTRY_POINT_GROUP = "torch.backends"

# upstream's _RELEASE_TRIPLE (torch_tpu/_versioned_so_loader.py), unchanged
_RELEASE_TRIPLE = re.compile(
    r"""^v?(\d+)\.(\d+)\.(\d+)
        (?:\.\d+)*
        (?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?
        (?:-\d+|[-_.]?(?:post|rev|r)[-_.]?\d*)?
        (?:[-_.]?dev[-_.]?\d*)?
        (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$
    """,
    re.VERBOSE | re.IGNORECASE,
)


def version_suffix(torch_version: str) -> str | None:
    """``2.13.0+cpu`` -> ``2_13_0`` (upstream's ``version_suffix``); None: unparsable."""
    match = _RELEASE_TRIPLE.match(torch_version)
    return "_".join(match.groups()) if match else None


def glue_suffix(so_name: str) -> str | None:
    """``env_2_13_0.so`` -> ``2_13_0`` (upstream's ``_glue_suffix``); None: not a glue."""
    parts = so_name.removesuffix(".so").split("_")
    if len(parts) < 4 or not all(part.isdigit() for part in parts[-3:]):
        return None
    return "_".join(parts[-3:])


def _triple(suffix: str) -> tuple[int, ...]:
    return tuple(int(part) for part in suffix.split("_"))


def dotted(suffix: str) -> str:
    return suffix.replace("_", ".")


def select_glue(torch_version: str, glues: tuple[str, ...]) -> str | None:
    """The glue the loader takes for ``torch_version``: the newest <= its triple (upstream's
    ``resolve_suffix``); None when none can serve it."""
    running = version_suffix(torch_version)
    if running is None:
        return None
    candidates = [g for g in glues if _triple(g) <= _triple(running)]
    return max(candidates, key=_triple) if candidates else None


@dataclass(frozen=True)
class TpuWheel:
    """What pairing reads from one torch_tpu wheel."""

    filename: str
    version: str
    torch_requirement: str  # the specifier of its Requires-Dist on torch ("" when it names none)
    glues: tuple[str, ...]  # glue suffixes, oldest first (2_11_0, ...)
    entry_point: str = ""  # its torch.backends entry point ("torch_tpu._loader:load")
    requires: tuple[str, ...] = ()

    def supported(self) -> str:
        """``torch>=2.11.0,<=2.15.0 (glue for 2.11.0, 2.12.0, ...)``, for messages."""
        spec = f"torch{self.torch_requirement}" if self.torch_requirement else "any torch"
        glue = ", ".join(dotted(g) for g in self.glues) or "none"
        return f"{spec} (glue for {glue})"


@dataclass(frozen=True)
class Pairing:
    ok: bool
    glue: str = ""  # the glue suffix the loader will take
    why: str = ""  # why not, or how it pairs (a local version by its public one)


def torch_requirement(requires: tuple[str, ...]) -> str:
    """The specifier of the Requires-Dist on torch, markers ignored ("" when there is none)."""
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if normalize_name(req.name) == "torch":
            return str(req.specifier)
    return ""


def _entry_point(text: str) -> str:
    """The ``torch.backends`` entry of an entry_points.txt ("name = module:attr")."""
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == ENTRY_POINT_GROUP and "=" in line:
            name, _, value = line.partition("=")
            return f"{name.strip()} = {value.strip()}"
    return ""


def read_tpu_wheel(path: Path) -> TpuWheel:
    """The pairing facts of a torch_tpu wheel; a wheel that cannot be read (truncated, not a
    zip, METADATA disagreeing with its name) is one PackageIndexError naming the file."""
    wheel = parse_filename(path.name)
    meta = read_metadata(path, wheel)
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            points = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/entry_points.txt")]
            entry = _entry_point(zf.read(points[0]).decode("utf-8", "replace")) if points else ""
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError, OSError) as exc:
        raise unreadable_wheel(exc, path) from None
    glues = {s for n in names if n.startswith(PACKAGE) and n.endswith(".so")
             and (s := glue_suffix(n.rsplit("/", 1)[-1])) is not None}
    return TpuWheel(path.name, meta.version, torch_requirement(meta.requires_dist),
                    tuple(sorted(glues, key=_triple)), entry, meta.requires_dist)


def public(torch_version: str) -> str:
    try:
        return Version(torch_version).public
    except InvalidVersion:
        return torch_version


def in_range(torch_version: str, requirement: str) -> bool:
    """Whether the Requires-Dist range admits the torch's public version (pre-releases count)."""
    if not requirement:
        return True
    try:
        return SpecifierSet(requirement).contains(Version(torch_version).public, prereleases=True)
    except InvalidVersion:
        return False


def pair(torch_version: str, wheel: TpuWheel) -> Pairing:
    """Whether ``wheel`` runs with a torch of ``torch_version``, and through which glue."""
    shown = public(torch_version)
    label = f"torch {torch_version}" + (f" (public version {shown})" if shown != torch_version else "")
    if not in_range(torch_version, wheel.torch_requirement):
        return Pairing(False, why=f"{label} is outside its Requires-Dist torch{wheel.torch_requirement}")
    if not wheel.glues:
        return Pairing(False, why=f"the wheel carries no versioned glue (*_X_Y_Z.so) for {label}")
    glue = select_glue(torch_version, wheel.glues)
    if glue is None:
        return Pairing(False, why=f"the wheel has no glue for {label}: its oldest is {dotted(wheel.glues[0])}")
    how = f"glue {glue}" + (f" (serves torch {dotted(glue)} and later)" if glue != version_suffix(torch_version)
                            else "")
    if shown != torch_version:
        how += f"; {torch_version} pairs by its public version {shown}"
    return Pairing(True, glue, how)


__all__ = ["Pairing", "TpuWheel", "dotted", "glue_suffix", "in_range", "pair", "public", "read_tpu_wheel",
           "select_glue", "torch_requirement", "version_suffix", "ENTRY_POINT_GROUP"]
