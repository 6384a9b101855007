"""A self-contained index: a wheel's runtime dependencies come into the index with it.

A torch wheel requires filelock, typing-extensions, sympy, networkx, jinja2 and fsspec
(pytorch/pytorch ``tools/metadata/dependencies.py``; setup.py's install_requires before);
an index that holds torch alone cannot install it, offline or in a ``--network none``
container. When a wheel enters the index (built, ``index add``, fetched), its
Requires-Dist evaluated for the python stage's interpreter and platform are fetched too,
through builder.fetch (download cache, sha256 checked against upstream). A requirement
that a wheel already in the index satisfies (a torch builder built itself, say) is not
fetched.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from builder.errors import IndexError_
from builder.index import DirectoryIndex, Entry
from builder.wheelmeta import normalize_name, parse_filename

Note = Callable[[str], None]


def requires_dist(path: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA."""
    wheel = parse_filename(path.name)
    try:
        with zipfile.ZipFile(path) as zf:
            member = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")
                           and n.count("/") == 1 and normalize_name(n.split("-", 1)[0]) == wheel.normalized), None)
            if member is None:
                raise IndexError_(f"{path}: no .dist-info/METADATA")
            raw = zf.read(member).decode("utf-8", errors="replace")
    except (zipfile.BadZipFile, OSError) as exc:
        raise IndexError_(f"{path}: cannot read the wheel's METADATA ({exc})") from None
    return [value.strip() for value in HeaderParser().parsestr(raw).get_all("Requires-Dist") or []]


def marker_environment(python_series: str) -> dict[str, str]:
    """The python stage's interpreter and platform, as PEP 508 markers see them."""
    return {"python_version": python_series, "python_full_version": f"{python_series}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
            "os_name": "posix", "extra": ""}


def runtime_requirements(requires: list[str], python_series: str) -> list[str]:
    """Requirements that apply to that interpreter without extras, markers dropped."""
    env = marker_environment(python_series)
    out = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            raise IndexError_(f"invalid Requires-Dist {text!r}") from None
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        req.marker = None
        out.append(str(req))
    return out


def satisfied_by(entries: list[Entry], requirement: str) -> bool:
    req = Requirement(requirement)
    for entry in entries:
        if normalize_name(entry.name) != normalize_name(req.name):
            continue
        try:
            if req.specifier.contains(Version(entry.version), prereleases=True):
                return True
        except InvalidVersion:
            continue
    return False


def unmet(index: DirectoryIndex, requirements: list[str]) -> list[str]:
    entries = index.entries()
    return [r for r in requirements if not satisfied_by(entries, r)]


def fetch_dependencies(cfg, index: DirectoryIndex, filenames: list[str], note: Note) -> str:  # noqa: ANN001
    """Fetch what the wheels ``filenames`` (already in ``index``) need at run time and the
    index cannot yet give; returns a one-line summary."""
    from builder.fetch import completion_notes, default_cache_dir, fetch

    wanted: list[str] = []
    for filename in filenames:
        for req in runtime_requirements(requires_dist(index.files_dir / filename), cfg.python.version):
            if req not in wanted:
                wanted.append(req)
    missing = unmet(index, wanted)
    # Packages builder itself builds (torch for a torch_xla) come from this index only: an
    # unmet one is the user's to build or import, never a multi-GB surprise from PyPI.
    from builder.recipes import RECIPES

    own = {normalize_name(recipe.project) for recipe in RECIPES.values()}
    skipped = [r for r in missing if normalize_name(Requirement(r).name) in own]
    missing = [r for r in missing if r not in skipped]
    if skipped:
        note(f"not fetching {', '.join(skipped)}: build or import it into the index (`builder wheels`, "
             "`builder index add`)")
    if not missing:
        return "dependencies: all in the index"
    cache = default_cache_dir(cfg.data_dir, cfg.prebuilt.download_cache)
    result = fetch(missing, index, cache, cfg.python.version, cfg.prebuilt.index_url, cfg.prebuilt.find_links,
                   log=cfg.logs_dir / "fetch-dependencies.log", progress=completion_notes(note), note=note)
    return f"dependencies: {result.summary()}"
