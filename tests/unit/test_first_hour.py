"""A newcomer's first hour: the CA bundle found by itself, help with examples, the
three first commands, the distribution name, the two-command set-up."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from builder.config import describe_ca, host_ca_bundle, load_config
from builder.errors import BuildError
from builder.stages.images import explain_certificate_failure, log_shows_certificate_failure
from tests.conftest import REPO, run_builder


@pytest.fixture
def bundles(tmp_path: Path) -> dict[str, str]:
    paths = {}
    for name in ("ssl", "requests", "pip"):
        path = tmp_path / f"{name}.pem"
        path.write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
        paths[name] = str(path)
    return paths


def test_host_ca_order_is_ssl_cert_file_then_requests_then_pip(bundles):
    env = {"SSL_CERT_FILE": bundles["ssl"], "REQUESTS_CA_BUNDLE": bundles["requests"], "PIP_CERT": bundles["pip"]}
    assert host_ca_bundle(env) == ("SSL_CERT_FILE", bundles["ssl"])
    assert host_ca_bundle({**env, "SSL_CERT_FILE": ""}) == ("REQUESTS_CA_BUNDLE", bundles["requests"])
    assert host_ca_bundle({"SSL_CERT_FILE": "/no/such.pem", "PIP_CERT": bundles["pip"]}) == ("PIP_CERT", bundles["pip"])
    assert host_ca_bundle({}) is None


def test_unset_setting_uses_the_host_bundle_and_says_so(bundles):
    cfg = load_config(None, {"PIP_CERT": bundles["pip"]})
    assert cfg.ca.extra_certificates == bundles["pip"]
    assert describe_ca(cfg).startswith(f"CA: {bundles['pip']} (from $PIP_CERT")


def test_explicit_empty_setting_turns_the_host_bundle_off(bundles, tmp_path):
    toml = tmp_path / "builder.toml"
    toml.write_text('[ca]\nextra_certificates = ""\n')
    env = {"SSL_CERT_FILE": bundles["ssl"]}
    for cfg in (load_config(toml, env), load_config(None, {**env, "BUILDER_CA_EXTRA_CERTIFICATES": ""}),
                load_config(None, env, {"ca.extra_certificates": ""})):
        assert cfg.ca.extra_certificates == ""
        assert "Debian's bundle only" in describe_ca(cfg)


def test_explicit_setting_wins_over_the_environment(bundles):
    cfg = load_config(None, {"SSL_CERT_FILE": bundles["ssl"], "BUILDER_CA_EXTRA_CERTIFICATES": bundles["pip"]})
    assert cfg.ca.extra_certificates == bundles["pip"]
    assert describe_ca(cfg) == f"CA: {bundles['pip']} ([ca] extra_certificates)"


def test_no_host_ca_flag(bundles, tmp_path):
    env = {"SSL_CERT_FILE": bundles["ssl"], "BUILDER_DATA_DIR": str(tmp_path)}
    assert f'extra_certificates = "{bundles["ssl"]}"' in run_builder("config", env=env, cwd=tmp_path,
                                                                       check=True).stdout
    assert 'extra_certificates = ""' in run_builder("--no-host-ca", "config", env=env, cwd=tmp_path,
                                                    check=True).stdout


def test_certificate_failure_in_a_log_names_the_setting(tmp_path):
    log = tmp_path / "python.log"
    log.write_text("pip._vendor.urllib3.exceptions.SSLError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
                   "failed: unable to get local issuer certificate (_ssl.c:992)\n")
    cfg = load_config(None, {})
    original = BuildError("stage image builder/python:abc failed to build: exit 1", f"see the log {log}")
    explained = explain_certificate_failure(original, log, cfg)
    assert "CERTIFICATE_VERIFY_FAILED" in explained.message
    assert "[ca] extra_certificates" in str(explained) and str(explained).endswith(f"see the log {log}")
    log.write_text("E: Unable to locate package gcc-99\n")
    assert explain_certificate_failure(original, log, cfg) is original
    assert log_shows_certificate_failure("fatal: unable to access 'https://x/': SSL certificate problem: ...")


def test_no_arguments_prints_the_three_first_commands():
    done = run_builder(check=True)
    for line in ("builder demo", "builder wheels --torch main", "builder wheels --xla master", "builder index serve"):
        assert line in done.stdout
    assert "Usage" not in done.stdout  # the short start, not the full help


def test_every_command_help_has_an_example():
    from builder.cli.examples import EXAMPLES, walk
    from builder.cli.main import _register, app

    _register()
    paths = [path for path, _ in walk(app)]
    assert sorted(paths) == sorted(EXAMPLES)  # no command without an example, no example for a ghost
    for path, lines in EXAMPLES.items():
        assert all(line.startswith(f"builder {path}") or line.startswith("builder -c")
                   or line.startswith("builder --no-host-ca") for line in lines), path
    for path in ("images", "index serve", "wheels"):
        done = run_builder(*path.split(), "--help", check=True)
        assert "Examples:" in done.stdout and EXAMPLES[path][0] in done.stdout


def test_distribution_name_is_our_own_and_never_pip_install_builder():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == "torch-xla-builder"  # `builder` on PyPI is an unrelated project
    assert project["scripts"]["builder"] == "builder.cli.main:main"
    texts = {p: p.read_text() for p in [REPO / "README.md", REPO / "builder/workflows/nightly.yml",
                                        REPO / ".github/workflows/nightly.yml"]}
    texts["builder ci render"] = run_builder("ci", "render", check=True).stdout
    for where, text in texts.items():
        assert not re.search(r"pip install (-U |--upgrade )?builder\b(?![-_/.])", text), where
    assert "pip install ." in texts["builder ci render"]


def test_makefile_has_the_two_commands_on_the_setup_script():
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^test: setup$", makefile, re.M) and re.search(r"^demo: setup$", makefile, re.M)
    assert ".ci/setup" in makefile
    assert "make test" in (REPO / ".ci/run").read_text()
