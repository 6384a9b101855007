import subprocess

import pytest

from builder.errors import RefError
from builder.examples import head_sha
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
    sha = head_sha(path)
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


def git_repo(path, default: str, *branches: str) -> tuple[str, str]:
    """A one-commit repo with ``default`` as HEAD's branch and ``branches`` beside it."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "init", "-q", "-b", default, str(path)], check=True, env=env)
    (path / "f").write_text("x")
    subprocess.run(["git", "-C", str(path), "add", "f"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "m"], check=True, env=env)
    for name in branches:
        subprocess.run(["git", "-C", str(path), "branch", name], check=True, env=env)
    sha = head_sha(path)
    return f"file://{path}", sha


@pytest.fixture()
def master_repo(tmp_path):
    """A repo like pytorch/xla: default branch master, no main, one release branch."""
    return git_repo(tmp_path / "xla", "master", "r2.9")


def test_main_means_the_default_branch_when_there_is_no_main(master_repo):
    url, sha = master_repo
    resolved = resolve_ref(url, "main")
    assert (resolved.url, resolved.ref, resolved.sha) == (url, "master", sha)
    assert resolved.note == f"{repo_name(url)} has no branch main; using its default branch master at {sha[:7]}"
    exact = resolve_ref(url, "master")  # the branch itself: no note
    assert (exact.url, exact.ref, exact.sha, exact.note) == (url, "master", sha, "")


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


def test_repo_name_of_every_url_shape():
    assert repo_name("https://github.com/pytorch/xla.git/") == "pytorch/xla"
    assert repo_name("file:///srv/BOX") == "srv/BOX"
    assert repo_name("file:///xla.git") == "xla"
    assert repo_name("ssh://git@host/") == "ssh://git@host/"  # no path: the URL itself


def test_pick_sha_exact_full_names_and_head():
    symref = f"ref: refs/heads/main\tHEAD\n{A}\tHEAD\n{B}\trefs/heads/HEAD-ish\n"
    assert pick_sha("HEAD", symref) == A
    assert pick_sha("HEAD", f"{A}\tHEAD\nref: refs/heads/main\tHEAD\n") == A  # the symref line is no commit
    assert pick_sha("refs/heads/main", LISTING) == A
    assert pick_sha("refs/tags/v2.9.0", LISTING) == B  # a full tag name is peeled too
    assert pick_sha("heads/main", LISTING) == A  # refs/<ref>


def test_head_branch_reads_past_other_lines():
    listing = f"{B}\trefs/heads/main\nref: refs/heads/master\tHEAD\n{A}\tHEAD\n"
    assert head_branch(listing) == ("master", A)


def test_git_is_run_without_a_prompt_in_c_locale_with_a_timeout(monkeypatch):
    import builder.source.refs as refs

    seen = {}

    def run(command, **kwargs):
        seen.update(kwargs, command=command)
        return subprocess.CompletedProcess(command, 0, f"{A}\tHEAD\n", "")

    monkeypatch.setattr(refs.subprocess, "run", run)
    assert refs.ls_remote("file:///x", "main", options=("--symref",)) == f"{A}\tHEAD\n"
    assert seen["command"] == ["git", "ls-remote", "--symref", "--", "file:///x", "main"]
    assert seen["timeout"] == refs.GIT_TIMEOUT and seen["stdin"] == subprocess.DEVNULL
    env = seen["env"]
    assert (env["GIT_TERMINAL_PROMPT"], env["GIT_ASK_YESNO"], env["LC_ALL"]) == ("0", "false", "C")
    assert refs.git_env()["PATH"] == __import__("os").environ["PATH"]  # the rest of the environment kept


def test_ls_remote_failures_are_one_line(monkeypatch):
    import builder.source.refs as refs

    def timeout(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    monkeypatch.setattr(refs.subprocess, "run", timeout)
    with pytest.raises(RefError) as info:
        refs.ls_remote("file:///x")
    assert str(info.value) == f"cannot reach repository file:///x: git ls-remote timed out after {refs.GIT_TIMEOUT} s"
    monkeypatch.setattr(refs.subprocess, "run",
                        lambda command, **kw: subprocess.CompletedProcess(command, 128, "", ""))
    with pytest.raises(RefError) as info:
        refs.ls_remote("file:///x")
    assert info.value.message == "cannot reach repository file:///x: exit 128"
    assert info.value.hint == "check --torch-repo/--xla-repo (or [repos] in builder.toml)"
    monkeypatch.setattr(refs.subprocess, "run", lambda command, **kw: subprocess.CompletedProcess(
        command, 128, "", "\nfatal: 'x' does not appear to be a git repository\nfatal: more\n"))
    with pytest.raises(RefError) as info:
        refs.ls_remote("file:///x")
    assert info.value.message == "cannot reach repository file:///x: 'x' does not appear to be a git repository"


def test_malformed_url_or_ref_is_a_usage_error(repo):
    url, _ = repo
    with pytest.raises(RefError) as info:
        resolve_ref("--upload-pack=x", "main")
    assert info.value.message == "repository URL '--upload-pack=x' looks like a command-line option, not a URL"
    assert info.value.exit_code == 2
    with pytest.raises(RefError) as info:
        resolve_ref(url, "a b")
    assert info.value.message == "ref 'a b' is not a valid git ref (letters, digits, . _ / + -)"
    assert info.value.exit_code == 2
    with pytest.raises(RefError) as info:
        resolve_ref("ftp://host/x.git", "main")
    assert info.value.exit_code == 2 and info.value.hint == "use https://, http://, ssh://, git:// or file:///path"
    assert info.value.hint == validate_hint("ftp://host/x.git")


def validate_hint(url):
    from builder import validate
    from builder.errors import ValidationError

    try:
        validate.repo_url(url, "repository URL")
    except ValidationError as exc:
        return exc.hint
    raise AssertionError("valid")


def test_a_sha_is_taken_as_given_once_the_repo_answers(repo):
    url, sha = repo
    other = "d" * 40  # on no branch: checked when it is fetched, not here
    resolved = resolve_ref(url, other)
    assert (resolved.url, resolved.ref, resolved.sha, resolved.note) == (url, other, other, "")
    assert resolve_ref(url, sha).sha == sha


def test_closest_names_are_at_most_three_joined_by_or(tmp_path):
    url, _ = git_repo(tmp_path / "r", "main", "r2.7", "r2.8", "r2.9", "r2.6")
    with pytest.raises(RefError) as info:
        resolve_ref(url, "r2.10")
    # four equally close names: the three difflib ranks first, joined by "or"
    assert info.value.hint == "did you mean r2.9 or r2.8 or r2.7? name an existing branch, tag or a 40-hex SHA"
