"""Hostile and malformed values are rejected (or quoted) before they reach a shell,
git or a path. Table-driven: each row is an input that must be refused."""

import shlex

import pytest

from builder import validate
from builder.errors import ValidationError

REJECTED = [
    (validate.git_ref, "main; rm -rf /"),
    (validate.git_ref, "main\nrm -rf /"),
    (validate.git_ref, "$(touch /tmp/pwned)"),
    (validate.git_ref, "`id`"),
    (validate.git_ref, "--upload-pack=touch /tmp/x"),
    (validate.git_ref, "-c"),
    (validate.git_ref, "../../etc/passwd"),
    (validate.git_ref, "a..b"),
    (validate.git_ref, "x" * 300),
    (validate.git_ref, ""),
    (validate.git_ref, "main|cat"),
    (validate.git_ref, "refs/heads/main.lock"),
    (validate.repo_url, "--upload-pack=evil"),
    (validate.repo_url, "ext::sh -c touch% /tmp/x"),
    (validate.repo_url, "https://example.com/x.git; rm -rf /"),
    (validate.repo_url, "file://relative/path"),
    (validate.repo_url, "ftp://example.com/repo"),
    (validate.repo_url, "https://example.com/$(id)"),
    (validate.package_name, "torch; rm"),
    (validate.package_name, "../torch"),
    (validate.deb_version, "12.2.0 && curl evil"),
    (validate.deb_version, "12\n"),
    (validate.requirement, "setuptools"),
    (validate.requirement, "setuptools>=1"),
    (validate.requirement, "setuptools==1; os_name=='nt'"),
    (validate.requirement, "-e git+https://x"),
    (validate.env_name, "PATH;X"),
    (validate.env_name, "lower"),
    (validate.env_value, "a$(id)"),
    (validate.env_value, "a`id`"),
    (validate.image_ref, "debian:bookworm; rm"),
    (validate.image_ref, "Debian:Upper"),
    (validate.wheel_filename, "../torch-1.0-py3-none-any.whl"),
    (validate.wheel_filename, "/etc/torch-1.0-py3-none-any.whl"),
    (validate.wheel_filename, "torch-1.0.tar.gz"),
    (validate.http_url, "javascript:alert(1)"),
    (validate.snapshot, "2025"),
    (validate.volume_name, "../vol"),
]


def _id(check, value: str) -> str:
    """A test id pytest can select again from a command line (make mutate does): no "::"
    (pytest's separator) and no backslash (a repr's \\n is not matched back)."""
    return f"{check.__name__}:{value[:30]!r}".replace("::", ": :").replace("\\", "<bs>")


@pytest.mark.parametrize(("check", "value"), REJECTED, ids=[_id(c, v) for c, v in REJECTED])
def test_hostile_values_rejected(check, value):
    with pytest.raises(ValidationError):
        check(value)


ACCEPTED = [
    (validate.git_ref, "main"),
    (validate.git_ref, "v2.9.0"),
    (validate.git_ref, "release/2.9"),
    (validate.git_ref, "a" * 40),
    (validate.repo_url, "https://github.com/pytorch/pytorch.git"),
    (validate.repo_url, "file:///tmp/repos/faketorch"),
    (validate.deb_version, "1:14.0.6-12"),
    (validate.deb_version, "1.11.1-2~deb12u1"),
    (validate.requirement, "setuptools==80.9.0"),
    (validate.image_ref, "debian:bookworm@sha256:" + "a" * 64),
    (validate.image_ref, "localhost:5000/builder/base:abc"),
    (validate.wheel_filename, "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"),
]


@pytest.mark.parametrize(("check", "value"), ACCEPTED)
def test_good_values_pass(check, value):
    assert check(value) == value


@pytest.mark.parametrize("value", ["main; rm -rf /", "$(id)", "a b", "it's", "`x`"])
def test_shell_quote_round_trips(value):
    assert shlex.split(validate.shell_quote(value)) == [value]


def test_shell_quote_refuses_newline():
    with pytest.raises(ValidationError):
        validate.shell_quote("a\nb")


# Each refusal's exact line (what, where), as the user reads it: the field named, the
# value shown (a password in a URL as ***), what was expected.
MESSAGES = [
    (validate.sha, "abc", "sha 'abc' is not a valid 40-hex commit SHA"),
    (validate.sha, "A" * 40, f"sha '{'A' * 40}' is not a valid 40-hex commit SHA"),
    (validate.package_name, "torch; rm", "package 'torch; rm' is not a valid package name"),
    (validate.py_version, "v1", "version 'v1' is not a valid Python package version"),
    (validate.requirement, "x>=1", "requirement 'x>=1' is not a valid pinned requirement (name==version)"),
    (validate.env_name, "lower", "env name 'lower' is not a valid environment variable name (A-Z, 0-9, _)"),
    (validate.env_value, "a$(id)", "env value 'a$(id)' is not a valid environment value (no shell metacharacters)"),
    (validate.image_ref, "Bad/Image", "image 'Bad/Image' is not a valid image reference (name[:tag][@sha256:digest])"),
    (validate.snapshot, "2024", "snapshot '2024' is not a valid snapshot timestamp (YYYYMMDDTHHMMSSZ)"),
    (validate.volume_name, "-v", "volume '-v' is not a valid Docker volume name"),
    (validate.suite, "Bookworm", "suite 'Bookworm' is not a valid Debian suite name"),
    (validate.wheel_filename, "x.whl", "wheel 'x.whl' is not a valid wheel file name "
                                       "(name-version-py-abi-platform.whl)"),
    (validate.wheel_filename, "a/x-1-py3-none-any.whl", "wheel 'a/x-1-py3-none-any.whl' must be a bare wheel file "
                                                        "name, not a path"),
    (validate.wheel_filename, "a\\x-1-py3-none-any.whl", "wheel 'a\\\\x-1-py3-none-any.whl' must be a bare wheel "
                                                         "file name, not a path"),
    (validate.wheel_filename, ".x-1-py3-none-any.whl", "wheel '.x-1-py3-none-any.whl' must be a bare wheel file "
                                                       "name, not a path"),
    (validate.repo_url, "https://u:pw@h/x y", "repo 'https://***@h/x y' contains characters not allowed in a "
                                              "repository URL"),
    (validate.repo_url, "https://h/*", "repo 'https://h/*' contains characters not allowed in a repository URL"),
    (validate.repo_url, "file://host/x", "repo 'file://host/x' must be an absolute file:///path"),
    (validate.repo_url, "ssh://h/a::b", "repo 'ssh://h/a::b' uses git's transport syntax, which is not allowed"),
    (validate.repo_url, "http://[::1/x", "repo 'http://[::1/x' is not a valid URL (Invalid IPv6 URL)"),
    (validate.http_url, "ftp://h/x", "url 'ftp://h/x' is not an http(s) URL"),
    (validate.http_url, "https:///x", "url 'https:///x' is not an http(s) URL"),
    (validate.http_url, "https://u:pw@h/(x)", "url 'https://***@h/(x)' contains characters not allowed in a URL"),
    (validate.http_url, "http://h:99999/", "url 'http://h:99999/' is not a valid URL (Port out of range 0-65535)"),
    (validate.git_ref, "release/", "ref 'release/' is not a valid git ref"),
    (validate.git_ref, "v2.9.", "ref 'v2.9.' is not a valid git ref"),
    (validate.git_ref, "a//b", "ref 'a//b' is not a valid git ref"),
    (validate.git_ref, "-x", "ref '-x' is not a valid git ref (letters, digits, . _ / + -)"),
    (validate.git_ref, 3, "ref must be a string, got int"),
    (validate.git_ref, "", "ref is empty"),
    (validate.git_ref, "a" * 257, "ref is too long (257 > 256 characters)"),
    (validate.sha, "a\n", "sha contains a newline or NUL: 'a\\n'"),
    (validate.deb_version, "1:x", "version '1:x' is not a valid Debian package version"),
    (validate.repo_url, 7, "repo must be a string, got int"),
    (validate.repo_url, "-u", "repo '-u' looks like a command-line option, not a URL"),
    (validate.http_url, "", "url is empty"),
    (validate.wheel_filename, None, "wheel must be a string, got NoneType"),
    (validate.build_requirement, "-r x.txt", "requirement '-r x.txt' is not a valid requirement"),
    (validate.build_requirement, "x; $(id)", "requirement 'x; $(id)' is not a valid requirement"),
    (validate.build_requirement, "x @ https://h/x.whl", "requirement 'x @ https://h/x.whl' is not a valid requirement"),
    (validate.build_requirement, "", "requirement is empty"),
    (validate.shell_quote, True, "cannot shell-quote a bool: True"),
    (validate.shell_quote, None, "cannot shell-quote a NoneType: None"),
    (validate.shell_quote, "a\rb", "refusing to put a newline or NUL into a shell line: 'a\\rb'"),
]


@pytest.mark.parametrize(("check", "value", "message"), MESSAGES,
                         ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(MESSAGES)])
def test_each_refusal_is_one_exact_line(check, value, message):
    with pytest.raises(ValidationError) as err:
        check(value)
    assert err.value.message == message


def test_build_requirements_are_pep508_from_the_index():
    for good in ("setuptools", "ninja>=1.11", "numpy[extra]<3; python_version >= '3.10'", "cmake (>=3.27)"):
        assert validate.build_requirement(good) == good
    with pytest.raises(ValidationError) as err:
        validate.build_requirement("-e .")
    assert err.value.hint == "name[extras] version-specifiers; markers (no URLs, no pip options)"
    with pytest.raises(ValidationError) as err:  # packaging's own words follow (they vary by version)
        validate.build_requirement("x>=")
    assert err.value.message.startswith("requirement 'x>=' is not a valid requirement: ") and err.value.hint is None
    with pytest.raises(ValidationError) as err:  # a URL cannot pass the allowed characters (no '@', ':' or '/')
        validate.build_requirement("x @ file:///x.whl")
    assert err.value.message == "requirement 'x @ file:///x.whl' is not a valid requirement"


def test_an_unusable_scheme_says_which_work():
    with pytest.raises(ValidationError) as err:
        validate.repo_url("ftp://h/x")
    assert (err.value.message, err.value.hint) == ("repo 'ftp://h/x' has no allowed scheme",
                                                   "use https://, http://, ssh://, git:// or file:///path")


ACCEPTED_EXACT = [
    (validate.git_ref, "a" * 256),  # the longest
    (validate.env_name, "XLA_FLAGS"),
    (validate.deb_version, "1:14.0.6-12"),
    (validate.repo_url, "https://h/XLA.git"),
    (validate.http_url, "https://h/X/simple"),
    (validate.sha, "0123456789abcdef0123456789abcdef01234567"),
    (validate.package_name, "torch_xla"),
    (validate.py_version, "2.10.0a0+git21fec65"),
    (validate.requirement, "scikit-build-core[pyproject]==0.11.6"),
    (validate.env_name, "USE_CUDA"),
    (validate.env_value, "-O2 -g,x=1:/a@b%c+d"),
    (validate.image_ref, "builder/debian:bookworm-minbase"),
    (validate.image_ref, "127.0.0.1:5000/builder/python:abc@sha256:" + "0" * 64),
    (validate.snapshot, "20240101T000000Z"),
    (validate.volume_name, "builder-ccache"),
    (validate.wheel_filename, "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"),
    (validate.repo_url, "file:///srv/git/torch.git"),
    (validate.repo_url, "file://localhost/srv/git/torch.git"),
    (validate.repo_url, "git://h/x"),
    (validate.http_url, "http://127.0.0.1:8080/simple/"),
    (validate.http_url, "https://pypi.org/simple"),
]


@pytest.mark.parametrize(("check", "value"), ACCEPTED_EXACT,
                         ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(ACCEPTED_EXACT)])
def test_good_values_pass_unchanged(check, value):
    assert check(value) == value


def test_empty_optional_values_and_quoting():
    assert validate.env_value("") == "" and validate.snapshot("") == ""
    assert validate.shell_quote(3) == "3" and validate.shell_quote("a b") == "'a b'"
    assert validate.shell_quote(1.5) == "1.5"
