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


# ------------------------------------------------------------------ C++ standards (xla_cxx)
def test_torch_standard_from_cmake_and_the_header_guard():
    from builder.recipes.xla_cxx import torch_standard

    upstream_cmake = 'set(CMAKE_CXX_STANDARD\n    17\n    CACHE STRING\n          "The C++ standard")\n'
    assert torch_standard({"CMakeLists.txt": upstream_cmake}) == 17
    guard = "#if !defined(_MSC_VER) && __cplusplus < 202002L\n#error C++20 or later compatible compiler is required"
    assert torch_standard({"CMakeLists.txt": upstream_cmake, "all.h": guard}) == 20  # the higher one
    assert torch_standard({"CMakeLists.txt": "set(CMAKE_CXX_STANDARD 20)"}) == 20
    assert torch_standard({"CMakeLists.txt": "project(x)", "all.h": ""}) is None


def test_xla_standard_is_the_last_build_line_of_bazelrc():
    from builder.recipes.xla_cxx import xla_standard

    assert xla_standard("build:posix --cxxopt=-std=c++17\nbuild:posix --host_cxxopt=-std=c++17\n") == 17
    assert xla_standard("build --cxxopt=-std=c++17\nbuild --cxxopt=-std=gnu++20\n") == 20
    assert xla_standard("build:clang --cxxopt=-std=c++20\n") is None  # a config not used by default
    assert xla_standard("# build --cxxopt=-std=c++17\n") is None
    assert xla_standard("") is None


def test_cxx_check_refuses_only_an_xla_below_torch():
    from builder.errors import ConfigError
    from builder.recipes.xla_cxx import CxxPair, check_standards, standards_note
    from builder.source.refs import ResolvedRef

    torch, xla = ResolvedRef("u", "main", "a" * 40), ResolvedRef("v", "master", "b" * 40)
    for fine in (CxxPair(17, 17), CxxPair(17, 20), CxxPair(None, 17), CxxPair(20, None)):
        check_standards(fine, torch, xla, "2.9.0")
    with pytest.raises(ConfigError) as info:
        check_standards(CxxPair(20, 17), torch, xla, "2.9.0")
    assert info.value.exit_code == 2
    assert info.value.message.startswith(f"torch main ({'a' * 12}) needs C++20")
    assert "builder wheels --xla master" in info.value.hint and "--torch 2.9.0 --xla 2.9.0" in info.value.hint
    note = standards_note(CxxPair(20, None), torch, xla)
    assert note.startswith(f"C++ standard not stated by xla master ({'b' * 12})")


def test_ci_package_version():
    from builder.recipes.xla_pairing import ci_package_version

    assert ci_package_version("llvm_debian_repo: bookworm\n# PyTorch and PyTorch/XLA wheel versions.\n"
                              "package_version: 2.9.0\nnightly_release: false\n") == "2.9.0"
    assert ci_package_version("package_version: '2.8.1'  # quoted\n") == "2.8.1"
    assert ci_package_version("  package_version: 2.9.0\n") is None  # nested: not the top-level key
    assert ci_package_version("") is None


# ------------------------------------------------------------------ exact messages (mutation testing)
def test_series_of_two_part_versions_and_its_error():
    assert series("2.9") == (2, 9)
    with pytest.raises(ConfigError) as info:
        series("main")
    assert str(info.value) == "'main' is not a version"


def test_check_pair_messages_exactly():
    with pytest.raises(ConfigError) as info:
        check_pair("2.8.0", "2.9.0")  # no where: no prefix; torch before the last release: a torch_xla 2.8
    assert info.value.message == "torch_xla 2.9.0 is built for torch 2.9.*, not torch 2.8.0"
    assert info.value.hint == "use torch 2.9.0 (e.g. --torch 2.9.0), or a torch_xla 2.8.* for torch 2.8.0"
    with pytest.raises(ConfigError) as info:
        check_pair("2.13.0", "2.9.0", "here")  # past the last release: no partner exists
    assert info.value.message == "here: torch_xla 2.9.0 is built for torch 2.9.*, not torch 2.13.0"
    assert info.value.hint == ("use torch 2.9.0 (e.g. --torch 2.9.0); torch_xla 2.9.0 is the last release "
                               "(none exists for torch 2.13)")


def test_no_partner_reason_exactly():
    from builder.recipes.xla_pairing import no_partner_reason

    assert no_partner_reason("2.9.1") is None
    assert no_partner_reason("2.10.0") == (
        "no torch_xla exists for torch 2.10.0: torch_xla 2.9.0 (for torch 2.9.*) is the last release, and "
        "PyTorch/XLA is to be replaced by TorchTPU (pytorch/xla#9684)")


def test_source_pair_without_a_pin_uses_the_x_y_rule():
    from builder.recipes.xla_pairing import check_source_pair

    check_source_pair("2.9.0a0", "2.9.0", "xla main")  # pairs: nothing raised
    with pytest.raises(ConfigError) as info:
        check_source_pair("2.10.0a0", "2.9.0", "xla main (abc)")
    assert info.value.message == "xla main (abc): torch_xla 2.9.0 is built for torch 2.9.*, not torch 2.10.0a0"
    assert info.value.hint == ("build xla against torch 2.9 (xla's .torch_commit names the commit it pairs with), "
                               "or pass --xla-version if this xla really targets another torch")
    assert info.value.exit_code == 2


def test_pinned_versions_reads_past_bad_lines_and_only_exact_pins():
    assert pinned_versions(["not a requirement ((", "torch===2.9.0", "torch_xla==2.9.*", "numpy==2.0"]) == {
        "torch": "2.9.0", "numpy": "2.0"}


def test_standards_messages_exactly():
    from builder.recipes.xla_cxx import CxxPair, check_standards, standards_note
    from builder.source.refs import ResolvedRef

    torch, xla = ResolvedRef("u", "main", "a" * 40), ResolvedRef("v", "master", "b" * 40)
    assert standards_note(CxxPair(None, None), torch, xla) == (
        f"C++ standard not stated by torch main ({'a' * 12}) or xla master ({'b' * 12}) (CMakeLists.txt, "
        "torch/csrc/api/include/torch/all.h / .bazelrc): the pair is not checked; a mismatch would fail at "
        "compile time")
    with pytest.raises(ConfigError) as info:
        check_standards(CxxPair(20, 17), torch, xla, "2.9.0")
    assert info.value.message == (
        f"torch main ({'a' * 12}) needs C++20 (CMakeLists.txt, its headers), but xla master ({'b' * 12}) compiles "
        "with C++17 (.bazelrc): this pair cannot be compiled, --torch-unpinned or not")


def test_check_requirements_without_a_place_has_no_prefix():
    with pytest.raises(ConfigError) as info:
        check_requirements(["torch==2.8.0", "torch_xla==2.9.0"])
    assert info.value.message == "torch_xla 2.9.0 is built for torch 2.9.*, not torch 2.8.0"
