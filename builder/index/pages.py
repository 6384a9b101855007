"""The pages of a directory index, pure: PEP 503 HTML and PEP 691 JSON from its entries.

Kept apart from the storage (builder.index.directory) so what pip reads can be checked
without a file system: every link is relative (``../../files/<wheel>#sha256=<hex>``), so
the tree can be copied, rsync'ed or served as is; ``data-requires-python`` is escaped.
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

from packaging.version import InvalidVersion, Version

API_VERSION = "1.1"  # PEP 691 (1.1: PEP 700's size and versions)


@dataclass(frozen=True)
class Entry:
    """One published wheel, as the pages list it."""

    name: str
    version: str
    filename: str
    sha256: str
    requires_python: str | None
    manifest: dict[str, Any] | None
    normalized: str = ""
    size: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _file_href(filename: str, sha256: str) -> str:
    return f"../../files/{quote(filename)}#sha256={sha256}"


def _page(title: str, links: list[str]) -> str:
    head = ["<!DOCTYPE html>", "<html>", "  <head>", '    <meta name="pypi:repository-version" content="1.0">',
            f"    <title>{html.escape(title)}</title>", "  </head>", "  <body>"]
    return "\n".join([*head, *(f"    {link}<br>" for link in links), "  </body>", "</html>", ""])


def render_project_page(normalized: str, entries: list[Entry]) -> str:
    """PEP 503 project page; ``data-requires-python`` is HTML-escaped (``&gt;=3.8``)."""
    links = []
    for e in entries:
        attrs = f'href="{html.escape(_file_href(e.filename, e.sha256))}"'
        if e.requires_python:
            attrs += f' data-requires-python="{html.escape(e.requires_python, quote=True)}"'
        links.append(f"<a {attrs}>{html.escape(e.filename)}</a>")
    return _page(f"Links for {normalized}", links)


def render_root_page(normalized_names: list[str]) -> str:
    return _page("Simple index", [f'<a href="{html.escape(quote(n))}/">{html.escape(n)}</a>'
                                  for n in normalized_names])


def project_json(normalized: str, entries: list[Entry]) -> dict[str, Any]:
    """PEP 691 JSON for one project (for clients that read JSON from a static mirror)."""
    files = []
    for e in entries:
        item: dict[str, Any] = {
            "filename": e.filename, "url": _file_href(e.filename, e.sha256).split("#")[0],
            "hashes": {"sha256": e.sha256}, "size": e.size,
        }
        if e.requires_python:
            item["requires-python"] = e.requires_python
        files.append(item)
    versions = sorted({e.version for e in entries}, key=version_key)
    return {"meta": {"api-version": API_VERSION}, "name": normalized, "files": files,
            "versions": versions}


def root_json(normalized_names: list[str]) -> dict[str, Any]:
    return {"meta": {"api-version": API_VERSION}, "projects": [{"name": n} for n in normalized_names]}


def version_key(version: str) -> tuple[int, Version | str]:
    """Sort key for versions as pip orders them; one that is not PEP 440 sorts first."""
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)  # sorts before every valid version, so it is pruned first
