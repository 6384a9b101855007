"""torch / torch_xla pairing: torch_xla X.Y.* needs torch X.Y.*, refused before anything runs."""

from __future__ import annotations

import pytest

from builder.config import Config, PythonConfig
from builder.errors import ConfigError
from builder.recipes.xla_pairing import (
    check_config,
    check_pair,
    check_requirements,
    matching_torch,
    pair_ok,
    pinned_versions,
    series,
)
from builder.run.graph import PackageRequest, Request, resolve


@pytest.mark.parametrize("version,expected", [("2.9.0", (2, 9)), ("2.9.0+cu128", (2, 9)), ("2.10.0rc1", (2, 10)),
                                              ("2.9.0.dev20250101", (2, 9)), ("3", (3, 0))])
def test_series(version, expected):
    assert series(version) == expected


@pytest.mark.parametrize("torch,xla", [("2.9.0", "2.9.0"), ("2.9.1", "2.9.0"), ("2.9.0+cpu", "2.9.0"),
                                       ("2.7.0rc10", "2.7.0rc5"), ("2.9.0.dev20250801", "2.9.0.dev20250801")])
def test_same_major_minor_pairs(torch, xla):
    assert pair_ok(torch, xla)
    check_pair(torch, xla)


def test_mismatch_is_refused_naming_the_matching_torch():
    with pytest.raises(ConfigError) as info:
        check_pair("2.13.0", "2.9.0")
    text = str(info.value)
    assert "torch_xla 2.9.0 is built for torch 2.9.*" in text
    assert "--torch 2.9.0" in text and "2.13.0" in text
    assert matching_torch("2.9.0") == "2.9.*"


def test_not_a_version_is_a_config_error():
    with pytest.raises(ConfigError):
        series("main")


def test_pinned_versions_and_requirement_lists():
    pins = pinned_versions(["torch==2.9.0", "torch_xla[tpu]==2.9.0", "numpy>=1", "bad spec ((", "torch-xla===2.9.0"])
    assert pins == {"torch": "2.9.0", "torch-xla": "2.9.0"}
    check_requirements(["torch==2.9.0", "torch_xla==2.9.0"])
    check_requirements(["torch==2.13.0"])  # only one side pinned: nothing to pair
    with pytest.raises(ConfigError, match="torch 2.9"):
        check_requirements(["torch==2.13.0", "Torch_XLA==2.9.0"], "builder index fetch")


def test_config_pins_are_checked():
    check_config(Config())  # the defaults pin build tools only
    bad = Config(python=PythonConfig(requirements=["torch==2.13.0", "torch_xla==2.9.0"]))
    with pytest.raises(ConfigError, match=r"\[python\] requirements"):
        check_config(bad)


def test_wheels_plan_refuses_a_mismatched_pair_before_any_ref_or_download(monkeypatch):
    def no_network(*args, **kwargs):  # pragma: no cover - must not be reached
        raise AssertionError("resolve_ref called")

    monkeypatch.setattr("builder.recipes.base.resolve_ref", no_network)
    monkeypatch.setattr("builder.recipes.xla_pins.resolve_ref", no_network)

    def request(torch: str, xla: str) -> Request:
        return Request((PackageRequest("torch", torch), PackageRequest("xla", xla)))

    with pytest.raises(ConfigError, match="built for torch 2.9"):
        resolve(Config(), request("2.13.0", "2.9.0"))
    resolved = resolve(Config(), request("2.9.0", "2.9.0"))
    assert [(s.name, s.version) for s in resolved.sources] == [("torch", "2.9.0"), ("xla", "2.9.0")]


def test_torch_pin_is_the_last_non_comment_line():
    from builder.recipes.xla_pairing import parse_torch_pin

    assert parse_torch_pin("# 2025-09-29\n21fec65781bebe867faf209f89bb687ffd236ca4\n") == \
        "21fec65781bebe867faf209f89bb687ffd236ca4"
    assert parse_torch_pin("release/2.9\n") == "release/2.9"
    assert parse_torch_pin("# only a comment\n\n") is None


def test_default_xla_version_read_as_upstream_writes_it():
    from builder.recipes.xla_pairing import default_xla_version

    assert default_xla_version(["  version = os.getenv('TORCH_XLA_VERSION', '2.9.0')\n"]) == "2.9.0"
    assert default_xla_version(["", 'version = env.get("TORCH_XLA_VERSION", "2.99.0")']) == "2.99.0"
    assert default_xla_version(["version = os.environ['TORCH_XLA_VERSION']"]) is None


def test_no_partner_after_the_last_release():
    from builder.recipes.xla_pairing import no_partner_reason

    assert no_partner_reason("2.9.1") is None and no_partner_reason("2.8.0") is None
    reason = no_partner_reason("2.13.0")
    assert reason and "torch_xla 2.9.0" in reason and "TorchTPU" in reason
