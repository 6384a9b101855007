import subprocess

import pytest

from builder.errors import RefError
from builder.source.refs import is_version, pick_sha, resolve_ref

A, B, C = "a" * 40, "b" * 40, "c" * 40

LISTING = f"""{A}\tHEAD
{A}\trefs/heads/main
{B}\trefs/heads/release/2.9
{C}\trefs/tags/v2.9.0
{B}\trefs/tags/v2.9.0^{{}}
{C}\trefs/heads/feature/main
"""


def test_pick_exact_branch_over_suffix():
    assert pick_sha("main", LISTING) == A


def test_annotated_tag_is_peeled():
    assert pick_sha("v2.9.0", LISTING) == B


def test_nested_branch_and_missing():
    assert pick_sha("release/2.9", LISTING) == B
    assert pick_sha("mian", LISTING) is None


@pytest.mark.parametrize("text,expected", [("2.13.0", True), ("2.9", True), ("2.10.0rc1", True),
                                           ("2.13.0+cpu", True), ("main", False), ("v2.9.0", False),
                                           ("a" * 40, False)])
def test_is_version(text, expected):
    assert is_version(text) is expected


@pytest.fixture()
def repo(tmp_path):
    path = tmp_path / "repo"
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "f").write_text("x")
    subprocess.run(["git", "-C", str(path), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "m"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "tag", "-a", "v1", "-m", "t"], check=True, env=env)
    sha = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return f"file://{path}", sha


def test_resolve_against_real_repo(repo):
    url, sha = repo
    assert resolve_ref(url, "main").sha == sha
    assert resolve_ref(url, "v1").sha == sha


def test_unknown_ref_message(repo):
    url, _ = repo
    with pytest.raises(RefError) as info:
        resolve_ref(url, "mian")
    assert info.value.message == f"ref 'mian' not found in {url}"


def test_bad_repo_url(tmp_path):
    with pytest.raises(RefError, match="cannot reach repository"):
        resolve_ref(f"file://{tmp_path}/missing", "main")


@pytest.mark.parametrize("ref", ["--upload-pack=touch /tmp/pwned", "main;id", "$(id)"])
def test_hostile_refs_rejected_before_git(repo, ref):
    url, _ = repo
    with pytest.raises(RefError):
        resolve_ref(url, ref)


def test_option_as_url_rejected():
    with pytest.raises(RefError, match="option"):
        resolve_ref("--upload-pack=touch /tmp/pwned", "main")
