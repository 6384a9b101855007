"""A request is a set of packages; the graph orders them by what each builds against.

``builder wheels --torch main --xla main`` and ``--pkg torchvision=main`` both become a
``Request`` of ``PackageRequest``s. Resolution adds what a package builds against when
the request does not name it (a recipe may decide it: xla's ``.torch_commit``), orders
dependencies first, and resolves every ref with ``git ls-remote`` before anything is
built, so a typo costs one round trip. Nothing here knows a package by name: the
recipes say what they build against and how they pick it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from builder import validate
from builder.config import Config
from builder.errors import ConfigError
from builder.recipes import get_recipe
from builder.recipes.base import PackageSource, PlanInputs
from builder.run.sources import resolve_source
from builder.source.refs import is_version

PKG_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class PackageRequest:
    """One package the user asked for: a recipe and a ref or version (None: the graph decides)."""

    name: str
    spec: str | None = None
    repo: str = ""  # git URL overriding [repos] for this run
    version: str = ""  # explicit version of a source build (PYTORCH_BUILD_VERSION, TORCH_XLA_VERSION...)


@dataclass(frozen=True)
class Request:
    packages: tuple[PackageRequest, ...] = ()
    jobs: int = 0
    smoke: bool = True
    force_smoke: bool = False
    lock_file: str = ""  # set: build exactly what this builder.lock records (`--locked`)
    unpinned: bool = False  # build against the named packages even where a commit pins others

    def spec(self, name: str) -> str | None:
        return next((p.spec for p in self.packages if p.name == name), None)

    def repo(self, name: str) -> str:
        return next((p.repo for p in self.packages if p.name == name and p.repo), "")

    def versions(self) -> dict[str, str]:
        return {p.name: p.version for p in self.packages if p.version}


@dataclass(frozen=True)
class Resolved:
    """The request's packages in build order, each resolved."""

    sources: tuple[PackageSource, ...]
    inputs: PlanInputs
    named: frozenset[str] = field(default_factory=frozenset)  # the ones the user named

    def source(self, name: str) -> PackageSource | None:
        return next((s for s in self.sources if s.name == name), None)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the plan and summary say about how the request was read: a default branch
        taken for main/master, a pair accepted the way upstream builds it."""
        said = [s.ref.note for s in self.sources if s.ref is not None and s.ref.note]
        said += [s.note for s in self.sources if s.note]  # a prebuilt's pairing (torch by its public version)
        return tuple(dict.fromkeys([*said, *self.inputs.notes]))


def parse_pkg(option: str) -> PackageRequest:
    """``NAME=REF`` or ``NAME=VERSION`` (``--pkg``); ``NAME`` alone leaves the ref to the graph."""
    name, sep, spec = option.partition("=")
    name = name.strip().lower()
    if not PKG_NAME.match(name):
        raise ConfigError(f"--pkg {option!r}: {name!r} is not a package name",
                          "write --pkg NAME=REF or NAME=VERSION, e.g. --pkg torchvision=main")
    if sep and not spec.strip():
        raise ConfigError(f"--pkg {option!r} names no ref or version", f"write --pkg {name}=REF, e.g. {name}=main")
    return PackageRequest(name, spec.strip() if sep else None)


def merge(requests: list[PackageRequest]) -> tuple[PackageRequest, ...]:
    """One entry per package; the same package named twice with two specs is an error."""
    merged: dict[str, PackageRequest] = {}
    for request in requests:
        have = merged.get(request.name)
        if have is not None and have.spec is not None and request.spec is not None and have.spec != request.spec:
            raise ConfigError(f"{request.name} is requested twice: {have.spec} and {request.spec}", "name it once")
        if have is None or have.spec is None:
            merged[request.name] = PackageRequest(request.name, request.spec or (have.spec if have else None),
                                                  request.repo or (have.repo if have else ""),
                                                  request.version or (have.version if have else ""))
    return tuple(merged.values())


def build_order(cfg: Config, names: list[str]) -> list[str]:
    """``names`` and everything they build against, each after what it builds against."""
    order: list[str] = []
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        if name in visiting:
            raise ConfigError(f"packages build against each other: {' -> '.join([*visiting, name])}")
        visiting.append(name)
        for dependency in get_recipe(name, cfg).builds_against:
            visit(dependency)
        visiting.pop()
        order.append(name)

    for name in names:
        visit(name)
    return order


def check_syntax(cfg: Config, request: Request) -> None:
    """Every version, ref and repository URL of the request checked for syntax before any
    network call: a malformed ``--torch`` is a usage error (exit 2) even when another
    package's repository cannot be reached."""
    for package in request.packages:
        recipe = get_recipe(package.name, cfg)
        option = f"--{recipe.flag or package.name}" if recipe.flag_help else f"--pkg {package.name}="
        if package.spec is not None:
            if is_version(package.spec):
                validate.py_version(package.spec, option)
            else:
                validate.git_ref(package.spec, option)
        if package.repo:
            validate.repo_url(package.repo, f"--{package.name}-repo")


def resolve(cfg: Config, request: Request) -> Resolved:
    """Every package's source, dependencies first; refs resolved, nothing fetched or built.

    Dependents are visited first (reverse build order) so that one that pins what it
    builds against decides it; a package nobody named and nobody decided is an error."""
    # a package with no ref only carries settings (--NAME-repo, --NAME-version) for when
    # the graph pulls it in
    named = [p.name for p in request.packages if p.spec is not None]
    if not named:
        raise ConfigError("nothing to build", "pass --torch REF, --xla REF and/or --pkg NAME=REF")
    order = build_order(cfg, named)
    for name in order:
        get_recipe(name, cfg).check_config(cfg)
    check_syntax(cfg, request)
    inputs = PlanInputs(specs={p.name: p.spec for p in request.packages},
                        repo_url=lambda name: request.repo(name) or get_recipe(name, cfg).repo_url(cfg),
                        mirrors=Path(cfg.data_dir) / "mirrors", unpinned=request.unpinned,
                        versions=request.versions(), cfg=cfg)
    sources: dict[str, PackageSource] = {}
    decided_by: dict[str, str] = {}
    for name in reversed(order):
        recipe = get_recipe(name, cfg)
        if name not in sources:
            spec = inputs.specs.get(name)
            if spec is None:
                users = [n for n in order if name in get_recipe(n, cfg).builds_against]
                raise ConfigError(f"{', '.join(users)} builds against {name}, which nothing names",
                                  f"name it with --pkg {name}=REF (or a prebuilt {name} version)")
            sources[name] = resolve_source(cfg, recipe, spec, lambda name=name: inputs.repo_url(name))
        against = recipe.plan_against(sources[name], inputs)
        if sources[name].ref is None:  # a prebuilt version may depend on what it runs with (latest, pairing)
            sources[name] = recipe.settle(sources[name], inputs, against)
        for dependency, source in against.items():
            if dependency in sources and sources[dependency] != source:
                raise ConfigError(f"{name} builds against {dependency} {source.describe()}, but "
                                  f"{decided_by.get(dependency, 'the request')} needs "
                                  f"{sources[dependency].describe()}",
                                  f"name one {dependency} that suits both, or build them in separate runs")
            sources[dependency] = source
            decided_by.setdefault(dependency, name)
    return Resolved(tuple(sources[name] for name in order), inputs, frozenset(named))
