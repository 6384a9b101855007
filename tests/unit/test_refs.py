import subprocess

import pytest

from builder.errors import RefError
from builder.source.refs import branch_and_tag_names, head_branch, is_version, pick_sha, repo_name, resolve_ref

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
    assert info.value.hint == "did you mean main? name an existing branch, tag or a 40-hex SHA"
    assert info.value.exit_code == 1


def test_unknown_ref_far_from_every_name_has_no_guess(repo):
    url, _ = repo
    with pytest.raises(RefError) as info:
        resolve_ref(url, "zzzzzz")
    assert info.value.hint == "name an existing branch, tag or a 40-hex SHA"


@pytest.fixture()
def master_repo(tmp_path):
    """A repo like pytorch/xla: default branch master, no main, one release branch."""
    path = tmp_path / "xla"
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "init", "-q", "-b", "master", str(path)], check=True, env=env)
    (path / "f").write_text("x")
    subprocess.run(["git", "-C", str(path), "add", "f"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "m"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "branch", "r2.9"], check=True, env=env)
    sha = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return f"file://{path}", sha


def test_main_means_the_default_branch_when_there_is_no_main(master_repo):
    url, sha = master_repo
    resolved = resolve_ref(url, "main")
    assert (resolved.ref, resolved.sha) == ("master", sha)
    assert resolved.note == f"{repo_name(url)} has no branch main; using its default branch master at {sha[:7]}"
    exact = resolve_ref(url, "master")  # the branch itself: no note
    assert (exact.ref, exact.sha, exact.note) == ("master", sha, "")


def test_only_default_names_fall_back_to_head(master_repo):
    url, _ = master_repo
    with pytest.raises(RefError) as info:
        resolve_ref(url, "develop")
    assert info.value.message == f"ref 'develop' not found in {url}"


def test_default_name_in_a_repo_that_has_it_is_that_branch(repo):
    url, sha = repo
    resolved = resolve_ref(url, "main")
    assert (resolved.ref, resolved.sha, resolved.note) == ("main", sha, "")
    with pytest.raises(RefError):  # master is not HEAD's name here, but main is: no fallback to a
        resolve_ref(url, "mastr")  # misspelt name


def test_head_branch_and_names_from_listings():
    listing = f"ref: refs/heads/master\tHEAD\n{A}\tHEAD\n{B}\trefs/heads/master\n"
    assert head_branch(listing) == ("master", A)
    assert head_branch(f"{A}\tHEAD\n") is None  # no symref line: HEAD's branch unknown
    assert head_branch("ref: refs/heads/master\tHEAD\n") is None  # no sha
    assert branch_and_tag_names(LISTING) == ["feature/main", "main", "release/2.9", "v2.9.0"]


def test_repo_name():
    assert repo_name("https://github.com/pytorch/xla.git") == "pytorch/xla"
    assert repo_name("file:///srv/git/xla/") == "git/xla"


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
