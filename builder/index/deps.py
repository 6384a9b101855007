"""A self-contained index: a wheel's runtime dependencies come into the index with it.

A torch wheel requires filelock, typing-extensions, sympy, networkx, jinja2 and fsspec
(pytorch/pytorch ``tools/metadata/dependencies.py``; setup.py's install_requires before);
an index that holds torch alone cannot install it, offline or in a ``--network none``
container. When a wheel enters the index (built, ``index add``, fetched), its
Requires-Dist evaluated for the python stage's interpreter and platform are fetched too,
through builder.index.fetch (download cache, sha256 checked against upstream). A requirement
that a wheel already in the index satisfies (a torch builder built itself, say) is not
fetched; "satisfies" means the name, the version and an install tag the python stage
accepts, so a cp312 wheel in the index does not stand in for a cp311 one.
"""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from builder.console import Note
from builder.errors import BuildError, PackageIndexError
from builder.index.directory import DirectoryIndex
from builder.index.pages import Entry
from builder.index.wheelmeta import normalize_name, parse_filename, read_metadata
from builder.interpreter import Interpreter, interpreter


def requires_dist(path: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA (read and checked by builder.index.wheelmeta)."""
    return list(read_metadata(path, parse_filename(path.name)).requires_dist)


def runtime_requirements(requires: list[str], python: Interpreter | str,
                         extras: tuple[str, ...] = ()) -> list[str]:
    """Requirements that apply to that interpreter, markers dropped. A requirement behind
    ``extra == "x"`` applies only when ``x`` is among ``extras`` (as ``pip install pkg[x]``)."""
    env = interpreter(python).markers()
    envs = [env] + [{**env, "extra": normalize_name(extra)} for extra in extras]
    out: list[str] = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            raise PackageIndexError(f"invalid Requires-Dist {text!r}") from None
        if req.marker is not None and not any(req.marker.evaluate(e) for e in envs):
            continue
        req.marker = None
        if str(req) not in out:
            out.append(str(req))
    return out


def target_tags(python: Interpreter | str) -> frozenset[Tag]:
    """The wheel tags the python stage's interpreter installs (the platforms builder.index.resolve asks for)."""
    python = interpreter(python)
    return frozenset([*cpython_tags(python.version, [python.abi, "abi3", "none"], python.platforms),
                      *compatible_tags(python.version, python.abi, python.platforms)])


def installable(entry: Entry, tags: frozenset[Tag], python: Interpreter | str) -> bool:
    """Whether pip on the python stage would install this wheel (its tags, Requires-Python)."""
    try:
        wheel_tags = parse_wheel_filename(entry.filename)[3]
    except InvalidWheelFilename:
        return False
    if tags.isdisjoint(wheel_tags):
        return False
    if not entry.requires_python:
        return True
    try:
        full = interpreter(python).markers()["python_full_version"]
        return SpecifierSet(entry.requires_python).contains(full, prereleases=True)
    except InvalidSpecifier:
        return True  # pip ignores an unparsable Requires-Python too


def satisfied_by(entries: list[Entry], requirement: str, python: Interpreter | str = "3.11") -> bool:
    req = Requirement(requirement)
    tags = target_tags(python)
    for entry in entries:
        if normalize_name(entry.name) != normalize_name(req.name):
            continue
        try:
            if (req.specifier.contains(Version(entry.version), prereleases=True)
                    and installable(entry, tags, python)):
                return True
        except InvalidVersion:
            continue
    return False


def unmet(index: DirectoryIndex, requirements: list[str], python: Interpreter | str = "3.11") -> list[str]:
    """The requirements no wheel in the index satisfies for that interpreter."""
    entries = index.entries()
    return [r for r in requirements if not satisfied_by(entries, r, python)]


def fetch_dependencies(cfg, index: DirectoryIndex, filenames: list[str], note: Note,  # noqa: ANN001
                       extras: tuple[str, ...] = (), *, own_projects: frozenset[str]) -> str:
    """Fetch what the wheels ``filenames`` (already in ``index``) need at run time and the
    index cannot yet give (with the requirements of ``extras`` too), but ``own_projects``
    (what builder builds: the recipes' projects, given by the caller); returns a one-line
    summary. Cheap when nothing is missing (reads METADATA and the index pages, starts no
    pip), so it can run after every add."""
    from builder.index.download import completion_notes, default_cache_dir
    from builder.index.fetch import fetch

    python = Interpreter.of(cfg)
    wanted: list[str] = []
    for filename in filenames:
        for req in runtime_requirements(requires_dist(index.files_dir / filename), python, extras):
            if req not in wanted:
                wanted.append(req)
    missing = unmet(index, wanted, python)
    # Packages builder itself builds (torch for a torch_xla) come from this index only: an
    # unmet one is the user's to build or import, never a multi-GB surprise from PyPI.
    own = {normalize_name(project) for project in own_projects}
    skipped = [r for r in missing if normalize_name(Requirement(r).name) in own]
    missing = [r for r in missing if r not in skipped]
    if skipped:
        note(f"not fetching {', '.join(skipped)}: build or import it into the index (`builder wheels`, "
             "`builder index add`)")
    if not missing:
        return "dependencies: all in the index"
    cache = default_cache_dir(cfg.prebuilt.download_cache)
    try:
        result = fetch(missing, index, cache, python, cfg.prebuilt.index_url, cfg.prebuilt.find_links,
                       log=cfg.logs_dir / "fetch-dependencies.log", progress=completion_notes(note), note=note)
    except BuildError as exc:
        raise BuildError(f"{', '.join(filenames)} published, but not its dependencies: {exc.message}",
                         f"{exc.hint + '; ' if exc.hint else ''}point [prebuilt] index_url / find_links at a "
                         "reachable source, or add with --no-deps") from exc
    return f"dependencies: {result.summary()}"
