"""Where a package's source comes from: a git commit (a mirror and a checkout) or a
package index's sdist (a verified download and an unpacked tree). The graph resolves
through ``resolve_source``, the plan reads ``source_requirements`` and ``source_time``,
the build calls ``check_out``; nothing else needs to know which kind a source is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from builder.config import Config
from builder.errors import ConfigError
from builder.recipes import deps_layer_requirements
from builder.recipes.base import PackageSource, Recipe, source_of
from builder.source.buildreqs import BuildRequirements, merge, read_build_requirements
from builder.source.mirror import SourceTree, checkout, commit_time, update_mirror
from builder.source.refs import ResolvedRef, is_version
from builder.source.sdist import checkout_sdist, fetch_sdist, resolve_sdist, sdist_build_requirements, sdist_time
from builder.store import DownloadStore, download_cache


def sdist_cache(cfg: Config) -> DownloadStore:
    """Verified sdists, by sha256: in the user's download cache with the prebuilt wheels
    (builder.store; ``[prebuilt] download_cache`` moves it)."""
    return DownloadStore(download_cache(cfg.prebuilt.download_cache))


def resolve_source(cfg: Config, recipe: Recipe, spec: str, repo_url: Callable[[], str]) -> PackageSource:
    """The source ``spec`` names for ``recipe``: an sdist recipe's version is found in
    ``[prebuilt] index_url`` (downloaded once, checked); otherwise a version is a prebuilt
    wheel and anything else a git ref in ``repo_url()``."""
    if recipe.prebuilt_only:
        if spec != "latest" and not is_version(spec):
            raise ConfigError(f"{recipe.project} {spec!r} is not a version: building {recipe.project} from source "
                              f"is not supported: {recipe.prebuilt_only}", "name a version or latest, e.g. "
                              f"--{recipe.flag or recipe.name} latest (--pkg {recipe.name}=latest)")
        return PackageSource(recipe.name, version=spec)
    if not recipe.sdist:
        return source_of(recipe.name, spec, repo_url())
    if not is_version(spec):
        raise ConfigError(f"--pkg {recipe.name}={spec}: [packages.{recipe.name}] builds the sdist of {recipe.sdist}, "
                          "which is named by a version", f"write --pkg {recipe.name}=VERSION, e.g. {recipe.name}=1.2.2")
    sdist = resolve_sdist(recipe.sdist, spec, cfg.prebuilt.index_url, sdist_cache(cfg))
    return PackageSource(recipe.name, ref=ResolvedRef(sdist.url, spec, sdist.sha256), sdist=sdist)


def source_requirements(cfg: Config, recipe: Recipe, source: PackageSource) -> BuildRequirements:
    """What the source says it needs to build (a commit's files, read in its mirror; an
    sdist's, read in the archive) plus the recipe's own ``build_requires``."""
    assert source.ref is not None
    if source.sdist is not None:
        found = sdist_build_requirements(source.sdist)
    else:
        mirror = update_mirror(Path(cfg.data_dir) / "mirrors", source.ref.url, source.ref.sha)
        found = read_build_requirements(mirror, source.ref.sha, source.name)
    # less what the package builds against: that comes from the local index at build time
    own = deps_layer_requirements(recipe, found.requirements)
    return replace(found, requirements=merge(list(own), list(recipe.build_requires)),
                   sources=(*found.sources, "builder.toml") if recipe.build_requires else found.sources)


def source_time(cfg: Config, source: PackageSource) -> int:
    """SOURCE_DATE_EPOCH of a build of ``source``: the commit's time, or the sdist's newest member's."""
    assert source.ref is not None
    if source.sdist is not None:
        return sdist_time(source.sdist)
    return commit_time(update_mirror(Path(cfg.data_dir) / "mirrors", source.ref.url, source.ref.sha), source.ref.sha)


def recorded_source(cfg: Config, recipe: Recipe, url: str, sha: str) -> PackageSource:
    """The source a manifest records (``builder verify``): an sdist recipe's URL and sha256
    (fetched again if the cache lost it), else a git URL and commit."""
    if recipe.sdist and len(sha) == 64:
        sdist = fetch_sdist(url, sha, sdist_cache(cfg))
        return PackageSource(recipe.name, ref=ResolvedRef(url, sdist.version, sha), sdist=sdist)
    return PackageSource(recipe.name, ref=ResolvedRef(url, sha, sha))


def check_out(cfg: Config, recipe: Recipe, source: PackageSource, dest: Path | None = None) -> SourceTree:
    """The source as a work tree at ``dest`` (default ``<data_dir>/src/<recipe>``: a fixed
    path), cleaned first."""
    assert source.ref is not None
    dest = dest or Path(cfg.data_dir) / "src" / recipe.name
    if source.sdist is not None:
        return checkout_sdist(source.sdist, dest)
    mirror = update_mirror(Path(cfg.data_dir) / "mirrors", source.ref.url, source.ref.sha)
    return checkout(mirror, source.ref.url, source.ref.sha, dest)
