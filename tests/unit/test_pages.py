"""The index's pages as pip and uv read them, byte for byte: PEP 503 HTML and PEP 691 JSON
(builder.index.pages). Exact outputs, so a changed title, attribute, escape, link or order
fails here rather than in a client that quietly ignores the page."""

from __future__ import annotations

from builder.index.pages import (
    API_VERSION,
    Entry,
    project_json,
    render_project_page,
    render_root_page,
    root_json,
    version_key,
)

A, B = "a" * 64, "b" * 64
HEAD = ("<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"1.0\">\n"
        "    <title>{title}</title>\n  </head>\n  <body>\n")
TAIL = "  </body>\n</html>\n"


def entry(filename: str, version: str, sha256: str, requires_python: str | None = None, size: int = 0) -> Entry:
    return Entry("Foo_Bar", version, filename, sha256, requires_python, None, "foo-bar", size)


def test_project_page_exact_with_escaped_requires_python_and_quoted_file_names():
    page = render_project_page("foo-bar", [
        entry("Foo_Bar-1.0-py3-none-any.whl", "1.0", A, '>=3.8,!="3.9"'),
        entry("foo bar-1.10-py3-none-any.whl", "1.10", B),
    ])
    assert page == HEAD.format(title="Links for foo-bar") + (
        '    <a href="../../files/Foo_Bar-1.0-py3-none-any.whl#sha256=' + A + '"'
        ' data-requires-python="&gt;=3.8,!=&quot;3.9&quot;">Foo_Bar-1.0-py3-none-any.whl</a><br>\n'
        '    <a href="../../files/foo%20bar-1.10-py3-none-any.whl#sha256=' + B + '">'
        "foo bar-1.10-py3-none-any.whl</a><br>\n") + TAIL


def test_root_page_exact_with_escaped_names():
    assert render_root_page(["a&b", "foo-bar"]) == HEAD.format(title="Simple index") + (
        '    <a href="a%26b/">a&amp;b</a><br>\n'
        '    <a href="foo-bar/">foo-bar</a><br>\n') + TAIL
    assert render_root_page([]) == HEAD.format(title="Simple index") + TAIL
    assert "<title>Links for x&amp;y</title>" in render_project_page("x&y", [])


def test_project_json_exact_files_in_given_order_versions_in_pep440_order():
    entries = [entry("foo_bar-1.10-py3-none-any.whl", "1.10", B, size=20),
               entry("foo_bar-1.9-py3-none-any.whl", "1.9", A, ">=3.8", size=10),
               entry("foo_bar-1.10-cp311-cp311-linux_x86_64.whl", "1.10", A, size=30),
               entry("foo_bar-2.0rc1-py3-none-any.whl", "2.0rc1", B, size=40),
               entry("foo_bar-weird-py3-none-any.whl", "weird", A, size=50)]
    doc = project_json("foo-bar", entries)
    assert doc == {
        "meta": {"api-version": "1.1"}, "name": "foo-bar",
        "files": [
            {"filename": "foo_bar-1.10-py3-none-any.whl", "url": "../../files/foo_bar-1.10-py3-none-any.whl",
             "hashes": {"sha256": B}, "size": 20},
            {"filename": "foo_bar-1.9-py3-none-any.whl", "url": "../../files/foo_bar-1.9-py3-none-any.whl",
             "hashes": {"sha256": A}, "size": 10, "requires-python": ">=3.8"},
            {"filename": "foo_bar-1.10-cp311-cp311-linux_x86_64.whl",
             "url": "../../files/foo_bar-1.10-cp311-cp311-linux_x86_64.whl", "hashes": {"sha256": A}, "size": 30},
            {"filename": "foo_bar-2.0rc1-py3-none-any.whl", "url": "../../files/foo_bar-2.0rc1-py3-none-any.whl",
             "hashes": {"sha256": B}, "size": 40},
            {"filename": "foo_bar-weird-py3-none-any.whl", "url": "../../files/foo_bar-weird-py3-none-any.whl",
             "hashes": {"sha256": A}, "size": 50},
        ],
        # one per version, as pip orders them (not as strings: 1.9 < 1.10); not PEP 440 first
        "versions": ["weird", "1.9", "1.10", "2.0rc1"],
    }
    assert API_VERSION == "1.1"  # PEP 700's size and versions are in every page


def test_root_json_exact():
    assert root_json(["a", "foo-bar"]) == {"meta": {"api-version": "1.1"},
                                           "projects": [{"name": "a"}, {"name": "foo-bar"}]}
    assert root_json([]) == {"meta": {"api-version": "1.1"}, "projects": []}


def test_version_key_orders_as_pip_with_invalid_versions_first():
    versions = ["2.0", "not a version", "1.10", "1.9", "1.10.post1", "1.10rc1", "zzz"]
    assert sorted(versions, key=version_key) == ["not a version", "zzz", "1.9", "1.10rc1", "1.10", "1.10.post1",
                                                 "2.0"]
