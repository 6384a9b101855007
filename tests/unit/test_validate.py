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


@pytest.mark.parametrize(("check", "value"), REJECTED, ids=[f"{c.__name__}:{v[:30]!r}" for c, v in REJECTED])
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
