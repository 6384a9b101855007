"""Build requirements read from the source at the commit being built.

PEP 517 builds with ``--no-isolation`` (what pytorch's own wheel jobs run) need the
backend and everything it imports installed beforehand. Upstream lists them per commit
in ``requirements-build.txt`` and in pyproject.toml's ``[build-system] requires``
(pytorch/pytorch keeps the two in sync; a release tag of the setuptools era and a
scikit-build-core main differ). They are read here with ``git show`` at plan time, and
installed in a deps image layer keyed by their content: commits with the same
requirements share the layer, a changed requirement makes only that layer again.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from builder.errors import BuildError
from builder.source.mirror import read_at_commit

REQUIREMENTS_FILE = "requirements-build.txt"
BAZEL_VERSION_FILE = ".bazelversion"
_BAZEL_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(rc[0-9]+)?$")
PYPROJECT = "pyproject.toml"
# PEP 517's default when pyproject.toml names no backend (setup.py only).
LEGACY_BACKEND = "setuptools.build_meta:__legacy__"


@dataclass(frozen=True)
class BuildRequirements:
    """What the commit says it needs to build, and which backend builds it."""

    backend: str
    requirements: tuple[str, ...]  # sorted, de-duplicated, each a valid PEP 508 requirement
    sources: tuple[str, ...]  # the files they came from, for messages and provenance
    bazel_version: str = ""  # the commit's .bazelversion (pytorch/xla): bazelisk runs this Bazel
    # the commit has a Bazel WORKSPACE (its recipe may then build it inside another
    # package's checkout: pytorch/xla's PYTORCH_LOCAL_DIR = "../")
    bazel_workspace: bool = False


def parse_requirements_file(text: str, where: str) -> list[str]:
    """Lines of a requirements file: comments and blanks dropped; pip options refused
    (a build must not pick its own index or read other files the plan did not see)."""
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise BuildError(f"{where}:{number}: pip option {line.split()[0]!r} is not supported in build requirements",
                             "list plain requirements (name, version specifiers, markers) only")
        out.append(_checked(line, f"{where}:{number}"))
    return out


def _checked(text: str, where: str) -> str:
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise BuildError(f"{where}: invalid requirement {text!r}: {exc}") from None
    if req.url:
        raise BuildError(f"{where}: requirement {text!r} points at a URL",
                         "build requirements must come from the package index")
    return str(req)


def parse_pyproject(text: str, where: str) -> tuple[str, list[str]]:
    """(backend, requires) of a pyproject.toml; PEP 517/518 defaults when absent."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BuildError(f"{where}: not valid TOML: {exc}") from None
    system = data.get("build-system", {})
    backend = system.get("build-backend", LEGACY_BACKEND)
    requires = system.get("requires", ["setuptools>=40.8.0"])
    if not isinstance(backend, str) or not isinstance(requires, list):
        raise BuildError(f"{where}: [build-system] build-backend must be a string and requires a list")
    return backend, [_checked(str(r), f"{where} [build-system] requires") for r in requires]


def merge(*lists: list[str]) -> tuple[str, ...]:
    """Union of requirement lists, exact duplicates dropped, sorted for a stable key."""
    return tuple(sorted({r for items in lists for r in items}, key=lambda r: (r.lower(), r)))


def build_requirements(read: Callable[[str], str | None], label: str) -> BuildRequirements:
    """The build requirements of a source tree, each file read with ``read(path)`` (None: no
    such file): one parser for a commit in a mirror and for an unpacked sdist."""
    sources = []
    from_file: list[str] = []
    text = read(REQUIREMENTS_FILE)
    if text is not None:
        from_file = parse_requirements_file(text, f"{label}:{REQUIREMENTS_FILE}")
        sources.append(REQUIREMENTS_FILE)
    backend, requires = LEGACY_BACKEND, ["setuptools>=40.8.0"]
    text = read(PYPROJECT)
    if text is not None:
        backend, requires = parse_pyproject(text, f"{label}:{PYPROJECT}")
        sources.append(PYPROJECT)
    bazel = read(BAZEL_VERSION_FILE)
    return BuildRequirements(backend, merge(from_file, requires), tuple(sources),
                             parse_bazel_version(bazel, f"{label}:{BAZEL_VERSION_FILE}") if bazel else "",
                             read("WORKSPACE") is not None)


def read_build_requirements(mirror: Path, sha: str, label: str) -> BuildRequirements:
    """Read them at ``sha`` from the bare mirror (no checkout)."""
    return build_requirements(lambda path: read_at_commit(mirror, sha, path), label)


def read_tree_build_requirements(root: Path, label: str) -> BuildRequirements:
    """Read them from a directory (an unpacked sdist). A file is read only when it is a
    regular file inside ``root`` (an unpacked archive's link is not followed out of it)."""
    top = root.resolve()

    def read(name: str) -> str | None:
        path = root / name
        if path.is_symlink() or not path.is_file() or not path.resolve().is_relative_to(top):
            return None
        return path.read_text(encoding="utf-8", errors="replace")

    return build_requirements(read, label)


def parse_bazel_version(text: str, where: str) -> str:
    """The Bazel release a .bazelversion names (its first non-comment line, as bazelisk reads it)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    if not lines or not _BAZEL_VERSION.match(lines[0]):
        raise BuildError(f"{where}: {lines[0] if lines else 'empty'!r} is not a Bazel release version",
                         "builder runs the Bazel of .bazelversion through bazelisk; name a release like 7.4.1")
    return lines[0]


def missing_module_hint(log_text: str, requirements: BuildRequirements, sources_label: str) -> str | None:
    """A one-line cause for a build that failed on a missing Python module or backend
    requirement (pypa/build's "Missing dependencies", or an import error deep in CMake's
    codegen), naming the requirement to add; None when the log shows neither."""
    missing = re.search(r"Missing dependencies:\s*\n\s*(\S+)", log_text)
    if missing:
        return (f"the build backend needs {missing.group(1)!r}, which is not in the build requirements "
                f"({sources_label}); add it there at that commit")
    imported = re.search(r"ModuleNotFoundError: No module named '([A-Za-z0-9_.]+)'", log_text)
    if imported:
        module = imported.group(1).split(".")[0]
        dist = MODULE_TO_DISTRIBUTION.get(module, module)
        return (f"the build imports the Python module {module!r} (package {dist!r}), which is not in the build "
                f"requirements ({sources_label}); add {dist} there at that commit")
    return None


# Import names whose distribution is spelled differently (the ones upstream's builds import).
MODULE_TO_DISTRIBUTION = {"yaml": "pyyaml", "typing_extensions": "typing-extensions",
                          "skbuild": "scikit-build", "scikit_build_core": "scikit-build-core"}
