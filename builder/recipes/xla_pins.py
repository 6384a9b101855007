"""Which torch a torch_xla source build pairs with, decided at plan time from the mirrors.

pytorch/xla master builds against the torch commit in its ``.torch_commit`` (release
branches pin ``release/X.Y``), inside a checkout of that torch; a torch_xla built against
another torch fails later with ``_XLAC ... undefined symbol`` (pytorch/xla#5553, #8626,
#8813, #9422). So ``--xla REF`` alone builds torch at the pin, an explicit ``--torch``
that differs from it is refused unless the user says ``--torch-unpinned``, and the two
versions (torch's ``version.txt``, xla's default ``TORCH_XLA_VERSION``) must pair
(builder.recipes.xla_pairing's X.Y rule) before anything is built.

The pinned pair itself is upstream's own and is never refused by that rule: xla master
pins a torch whose version.txt is 2.10.0a0 while declaring torch_xla 2.9.0, and
upstream's CI labels both wheels 2.9.0 (``package_version`` in
infra/ansible/config/vars.yaml). builder keeps each repository's own version (torch
2.10.0a0+git..., torch_xla 2.9.0+git...): a torch wheel named 2.9.0 that holds a 2.10
pre-release would take the place of the real torch 2.9.0 in the index. The plan and the
summary say so in a note. Before any of that, the two sides' C++ standards must agree
(builder.recipes.xla_cxx): torch main needs C++20, xla master compiles as C++17.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from builder.errors import ConfigError
from builder.recipes.xla_cxx import (
    TORCH_CXX_FILES,
    XLA_CXX_FILE,
    CxxPair,
    check_standards,
    standards_note,
    torch_standard,
    xla_standard,
)
from builder.recipes.xla_pairing import (
    CI_VERSION_FILE,
    LAST_XLA_RELEASE,
    TORCH_PIN_FILE,
    XLA_VERSION_FILES,
    check_pair,
    check_source_pair,
    ci_package_version,
    default_xla_version,
    pair_ok,
    parse_torch_pin,
    series,
)
from builder.source.mirror import read_at_commit, update_mirror
from builder.source.refs import ResolvedRef, is_version, resolve_ref


@dataclass(frozen=True)
class PairPlan:
    torch_ref: ResolvedRef | None  # None: prebuilt torch_version
    torch_version: str  # prebuilt version, or the source's version (version.txt / --torch-version)
    pinned: str | None  # the torch ref xla's .torch_commit names (None: no pin file)
    notes: tuple[str, ...] = ()  # for the plan and summary: the pinned pair's versions, an unchecked standard


def torch_source_version(mirrors: Path, ref: ResolvedRef) -> str | None:
    text = read_at_commit(update_mirror(mirrors, ref.url, ref.sha), ref.sha, "version.txt")
    return text.strip() if text and text.strip() else None


def xla_source_version(mirror: Path, sha: str) -> str | None:
    texts = [read_at_commit(mirror, sha, path) or "" for path in XLA_VERSION_FILES]
    return default_xla_version(texts)


def plan_pair(mirrors: Path, xla: ResolvedRef, torch_spec: str | None, torch_repo: str, unpinned: bool,
              torch_version: str = "", xla_version: str = "") -> PairPlan:
    """Resolve the torch side for a torch_xla built from ``xla`` and check the pair."""
    mirror = update_mirror(mirrors, xla.url, xla.sha)
    pin_text = read_at_commit(mirror, xla.sha, TORCH_PIN_FILE)
    pinned = parse_torch_pin(pin_text) if pin_text else None
    where = f"xla {xla.ref} ({xla.sha[:12]})"
    if torch_spec is None:
        if pinned is None:
            raise ConfigError(f"{where} has no {TORCH_PIN_FILE} naming the torch it builds against",
                              "name one with --torch REF (or a prebuilt --torch VERSION)")
        torch_ref: ResolvedRef | None = resolve_ref(torch_repo, pinned)
    elif is_version(torch_spec):
        torch_ref = None
    else:
        torch_ref = resolve_ref(torch_repo, torch_spec)
    xla_ver = xla_version or xla_source_version(mirror, xla.sha)
    if torch_ref is None:
        assert torch_spec is not None
        if xla_ver and not pair_ok(torch_spec, xla_ver):
            # a prebuilt torch of the pinned torch's series pairs too (a 2.10.0a0 wheel with
            # xla master, which declares 2.9.0); the pin is read only then (a torch mirror)
            pin_ver = pinned_torch_version(mirrors, torch_repo, pinned) if pinned else None
            if not (pin_ver and series(pin_ver) == series(torch_spec)):
                check_pair(torch_spec, xla_ver, where)  # names the last release when torch is past it
        return PairPlan(None, torch_spec, pinned)
    notes: list[str] = []
    torch_mirror = update_mirror(mirrors, torch_ref.url, torch_ref.sha)
    cxx = CxxPair(torch_standard({p: read_at_commit(torch_mirror, torch_ref.sha, p) or "" for p in TORCH_CXX_FILES}),
                  xla_standard(read_at_commit(mirror, xla.sha, XLA_CXX_FILE) or ""))
    check_standards(cxx, torch_ref, xla, LAST_XLA_RELEASE)  # physics first: no flag lifts it
    if cxx.torch is None or cxx.xla is None:
        notes.append(standards_note(cxx, torch_ref, xla))
    pinned_sha = None
    if pinned is not None:
        pinned_sha = torch_ref.sha if torch_spec is None else resolve_ref(torch_repo, pinned).sha
        if pinned_sha != torch_ref.sha and not unpinned:
            raise ConfigError(
                f"--torch {torch_spec} is {torch_ref.sha[:12]}, but {where} pins torch {pinned_sha} "
                f"in {TORCH_PIN_FILE}",
                "drop --torch to build the pinned torch, or add --torch-unpinned to build against "
                f"{torch_spec} anyway")
    torch_ver = torch_version or torch_source_version(mirrors, torch_ref)
    if torch_ver and xla_ver:
        if pinned_sha == torch_ref.sha:  # upstream's own pair: its versions need not match
            if series(torch_ver) != series(xla_ver):
                ci = ci_package_version(read_at_commit(mirror, xla.sha, CI_VERSION_FILE) or "")
                notes.append(f"{where} pins torch {torch_ref.sha[:12]} (version {torch_ver}) and declares "
                             f"torch_xla {xla_ver}: upstream's own pair, built as pinned"
                             + (f" (upstream's CI labels both {ci}: {CI_VERSION_FILE} package_version)" if ci else "")
                             + "; each wheel keeps its repository's version")
        else:
            check_unpinned_pair(mirrors, torch_ref, torch_ver, xla_ver, pinned_sha, where)
    return PairPlan(torch_ref, torch_ver or "", pinned, tuple(notes))


def pinned_torch_version(mirrors: Path, torch_repo: str, pinned: str) -> str | None:
    """version.txt at the torch commit (or release branch) xla's .torch_commit names."""
    sha = pinned if re.fullmatch(r"[0-9a-f]{40}", pinned) else resolve_ref(torch_repo, pinned).sha
    return torch_source_version(mirrors, ResolvedRef(torch_repo, pinned, sha))


def check_unpinned_pair(mirrors: Path, torch: ResolvedRef, torch_ver: str, xla_ver: str, pinned_sha: str | None,
                        where: str) -> None:
    """A torch other than the pin (--torch-unpinned) must be of the pinned torch's series,
    or of xla's declared one: xla master is developed against torch 2.10 pre-releases
    while declaring 2.9.0, so the pin's version.txt says which torch it compiles with.
    With no pin (or no version at it), xla's declared version decides (the X.Y rule)."""
    if pair_ok(torch_ver, xla_ver):
        return
    pinned_ver = pinned_torch_version(mirrors, torch.url, pinned_sha) if pinned_sha else None
    described = f"{where} with torch {torch.ref} ({torch.sha[:12]})"
    if not pinned_ver:
        check_source_pair(torch_ver, xla_ver, described)
    elif series(torch_ver) != series(pinned_ver):
        major, minor = series(pinned_ver)
        raise ConfigError(f"{described}: torch {torch_ver} is not of the {major}.{minor} series xla builds against "
                          f"(its {TORCH_PIN_FILE} names {pinned_sha[:12]}, version {pinned_ver})",
                          f"use a torch {major}.{minor} commit, or drop --torch to build the pinned one")


def unpinned_xla_version(mirrors: Path, xla: ResolvedRef, torch_url: str, torch_sha: str) -> str:
    """The version of a torch_xla built against a torch other than its ``.torch_commit``:
    upstream's ``<TORCH_XLA_VERSION>+git<xla sha7>`` plus ``.torch<torch sha7>``, so it
    never takes the name of the pinned build (xla records its torch commit, so the bytes
    differ). Empty when ``torch_sha`` is the pinned commit (or xla pins nothing)."""
    mirror = update_mirror(mirrors, xla.url, xla.sha)
    pin_text = read_at_commit(mirror, xla.sha, TORCH_PIN_FILE)
    pinned = parse_torch_pin(pin_text) if pin_text else None
    if pinned is None:
        return ""
    pinned_sha = pinned if re.fullmatch(r"[0-9a-f]{40}", pinned) else resolve_ref(torch_url, pinned).sha
    if pinned_sha == torch_sha:
        return ""
    base = xla_source_version(mirror, xla.sha) or "0.0.0"
    return f"{base}+git{xla.sha[:7]}.torch{torch_sha[:7]}"
