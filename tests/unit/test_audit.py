"""The wheel audit's decisions (builder.repro.audit): policy names from tags, the symbols
that limit a wheel's tag or keep it from an asked policy, the libraries outside a policy,
the repair command, and what the container script and env carry."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from builder.recipes import get_recipe
from builder.recipes.base import TORCH_LIBRARIES, BuildContext, audit_lines, container_phases
from builder.repro import audit
from builder.repro.audit import AuditError

# auditwheel 6.8.2's manylinux-policy.json, cut to three policies and their x86_64 lists' tails
POLICIES = [
    {"name": "linux", "aliases": [], "priority": 0, "symbol_versions": {}},
    {"name": "manylinux_2_17", "aliases": ["manylinux2014"], "priority": 80,
     "symbol_versions": {"x86_64": {"GLIBC": ["2.2.5", "2.14", "2.17"], "GLIBCXX": ["3.4", "3.4.14", "3.4.19"],
                                    "CXXABI": ["1.3", "1.3.7", "TM_1"], "GCC": ["3.0", "4.8.0"]}}},
    {"name": "manylinux_2_24", "aliases": [], "priority": 70,
     "symbol_versions": {"x86_64": {"GLIBC": ["2.2.5", "2.14", "2.17", "2.24"],
                                    "GLIBCXX": ["3.4", "3.4.14", "3.4.19", "3.4.21", "3.4.22"],
                                    "CXXABI": ["1.3", "1.3.7", "1.3.9", "1.3.10"], "GCC": ["3.0", "4.8.0", "6.0.0"]}}},
    {"name": "manylinux_2_28", "aliases": [], "priority": 64,
     "symbol_versions": {"x86_64": {"GLIBC": ["2.2.5", "2.14", "2.17", "2.24", "2.28"],
                                    "GLIBCXX": ["3.4", "3.4.14", "3.4.19", "3.4.21", "3.4.22", "3.4.25"],
                                    "CXXABI": ["1.3", "1.3.7", "1.3.9", "1.3.11"], "GCC": ["3.0", "4.8.0", "7.0.0"]}}},
]
# what `auditwheel show --json` says of the fixture torch wheel (measured here)
FIXTURE_TORCH = {"libc.so.6": ["GLIBC_2.14", "GLIBC_2.2.5"], "libgcc_s.so.1": ["GCC_3.0"],
                 "libstdc++.so.6": ["CXXABI_1.3", "CXXABI_1.3.9", "GLIBCXX_3.4", "GLIBCXX_3.4.14", "GLIBCXX_3.4.21"]}


def test_tags_and_policy_names():
    assert audit.platform_tag("torch-2.99.0a0+git36f786b-cp311-cp311-linux_x86_64.whl") == "linux_x86_64"
    assert audit.platform_tag("a-1-py3-none-any.whl") == "any"
    assert audit.policy_name("manylinux_2_17_x86_64.manylinux2014_x86_64") == "manylinux_2_17"
    assert audit.policy_name("musllinux_1_2_aarch64") == "musllinux_1_2"
    assert audit.policy_name("linux_x86_64") == "linux"


@pytest.mark.parametrize("arch", ["x86_64", "aarch64", "ppc64le", "s390x", "i686", "armv7l", "riscv64"])
def test_the_policy_of_a_tag_on_every_architecture(arch):
    assert audit.policy_name(f"manylinux_2_28_{arch}") == "manylinux_2_28"
    assert audit.family(f"manylinux_2_28_{arch}") == "manylinux"


def test_a_name_that_is_no_wheel_has_no_tag():
    assert audit.platform_tag("x-1-cp311-cp311-linux_x86_64.zip") == ""
    assert audit.family("musllinux_1_2") == "musllinux" and audit.family("linux") == "linux"


def test_symbols_of_an_unlisted_family_or_architecture_are_not_judged():
    # CXXABI_TM_1 is CXXABI's "TM_1" (the name is up to the first '_'), which 2_17 lists
    assert audit.offending_symbols({"libstdc++.so.6": ["CXXABI_TM_2", "CXXABI_TM_1"]}, POLICIES, "manylinux_2_17",
                                   "x86_64") == ["CXXABI_TM_2 (libstdc++.so.6)"]
    assert audit.offending_symbols(FIXTURE_TORCH, POLICIES, "manylinux_2_17", "riscv64") == []
    assert audit.offending_symbols(FIXTURE_TORCH, POLICIES, "manylinux_9_9", "x86_64") == []
    assert audit.offending_symbols({"libfoo.so": ["FOO_9.9"]}, POLICIES, "manylinux_2_17", "x86_64") == []


def test_the_limiting_symbols_are_those_the_next_wider_policy_lacks():
    limit = audit.limiting_symbols(FIXTURE_TORCH, POLICIES, "manylinux_2_24", "x86_64")
    assert limit == ["CXXABI_1.3.9 (libstdc++.so.6)", "GLIBCXX_3.4.21 (libstdc++.so.6)"]
    # the most compatible policy of the family: nothing is wider (linux is another family)
    assert audit.limiting_symbols(FIXTURE_TORCH, POLICIES, "manylinux_2_17", "x86_64") == []
    assert audit.limiting_symbols(FIXTURE_TORCH, POLICIES, "no_such", "x86_64") == []
    # the next wider one, not any wider one: 2_28 -> 2_24 only
    newer = {"libstdc++.so.6": ["GLIBCXX_3.4.25", "GLIBCXX_3.4.21"]}
    assert audit.limiting_symbols(newer, POLICIES, "manylinux_2_28", "x86_64") == ["GLIBCXX_3.4.25 (libstdc++.so.6)"]


def test_an_asked_policy_the_symbols_do_not_meet_is_refused_naming_them():
    show = {"sym_tag": "manylinux_2_24_x86_64", "versioned_symbols": FIXTURE_TORCH}
    with pytest.raises(AuditError) as caught:
        audit.check_plat(show, POLICIES, "manylinux2014", "x86_64")  # an alias names the policy too
    assert str(caught.value) == ("the wheel does not meet [wheels] plat manylinux2014: it needs "
                                 "CXXABI_1.3.9 (libstdc++.so.6), GLIBCXX_3.4.21 (libstdc++.so.6) "
                                 "(it meets manylinux_2_24)")
    assert caught.value.hint == ("build on an older base (a Debian suite with an older glibc and GCC), or set "
                                 "[wheels] plat = \"auto\" for the tightest policy this build meets")
    audit.check_plat(show, POLICIES, "manylinux_2_24", "x86_64")  # met exactly
    audit.check_plat(show, POLICIES, "manylinux_2_28", "x86_64")  # a less compatible one is met too
    audit.check_plat(show, POLICIES, "auto", "x86_64")
    with pytest.raises(AuditError) as unknown:
        audit.check_plat(show, POLICIES, "manylinux_2_99", "x86_64")
    assert str(unknown.value) == "[wheels] plat 'manylinux_2_99' is not a policy auditwheel knows on this machine"
    assert unknown.value.hint == ("name one of auditwheel's policies (manylinux_2_17, manylinux_2_28, ...) "
                                  "or \"auto\"")


def test_libraries_outside_the_policy_less_torchs_are_vendored_or_refused():
    # `auditwheel show --json` 6.8.2: soname -> the path it resolved (None: not found)
    external = {"libz.so.1": "/usr/lib/x86_64-linux-gnu/libz.so.1", "libtorch_cpu.so": None,
                "libc10.so": None, "libbz2.so.1.0": "/lib/x86_64-linux-gnu/libbz2.so.1.0"}
    assert audit.outside_libs(external, list(TORCH_LIBRARIES)) == ["libbz2.so.1.0", "libz.so.1"]
    assert audit.outside_libs(external, []) == ["libbz2.so.1.0", "libc10.so", "libtorch_cpu.so", "libz.so.1"]
    show = {"external_libs": external}
    assert audit.check_external(show, "vendor", list(TORCH_LIBRARIES)) == ["libbz2.so.1.0", "libz.so.1"]
    with pytest.raises(AuditError) as caught:
        audit.check_external(show, "refuse", list(TORCH_LIBRARIES))
    assert str(caught.value) == ("the wheel links shared libraries outside its manylinux policy: "
                                 "libbz2.so.1.0 (/lib/x86_64-linux-gnu/libbz2.so.1.0), "
                                 "libz.so.1 (/usr/lib/x86_64-linux-gnu/libz.so.1)")
    assert caught.value.hint == ('[wheels] external_libs = "vendor" bundles them into the wheel (auditwheel repair), '
                                 "or build without them")
    torchs = {"libtorch.so": None, "libtorch_cuda.so": None, "libc10_cuda.so": None, "libshm.so": None}
    assert audit.check_external({"external_libs": torchs}, "refuse", list(TORCH_LIBRARIES)) == []
    # libgomp is no torch library: an extension's OpenMP runtime is vendored
    assert audit.outside_libs({"libgomp.so.1": "/usr/lib/x86_64-linux-gnu/libgomp.so.1"},
                              list(TORCH_LIBRARIES)) == ["libgomp.so.1"]


def test_repair_command_auto_and_an_asked_policy_kept_as_asked():
    assert audit.repair_command("w.whl", "/out/dist", "auto", []) == [
        "auditwheel", "repair", "-w", "/out/dist", "--plat", "auto", "w.whl"]
    assert audit.repair_command("w.whl", "/d", "manylinux_2_28", ["libtorch.so*"]) == [
        "auditwheel", "repair", "-w", "/d", "--plat", "manylinux_2_28", "--only-plat",
        "--exclude", "libtorch.so*", "w.whl"]


def _wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x/__init__.py", "")
    return path


@pytest.mark.parametrize(("name", "plat"), [("x-1-cp311-cp311-linux_x86_64.whl", "linux"),
                                            ("x-1-py3-none-any.whl", "auto")])
def test_linux_or_a_pure_wheel_is_moved_untouched_without_auditwheel(tmp_path, monkeypatch, name, plat):
    raw, dist = tmp_path / "raw", tmp_path / "dist"
    raw.mkdir(), dist.mkdir()
    data = _wheel(raw / name).read_bytes()
    monkeypatch.setenv("BUILDER_WHEEL_PLAT", plat)
    monkeypatch.setenv("PATH", str(tmp_path))  # no auditwheel: none is needed
    assert audit.main([str(raw), str(dist), str(tmp_path)]) == 0
    assert (dist / name).read_bytes() == data and not (raw / name).exists()
    record = json.loads((tmp_path / audit.AUDIT_FILE).read_text())
    assert record["audited"] is False and record["tag"] == audit.platform_tag(name)


def test_no_auditwheel_in_the_image_is_one_clear_refusal(tmp_path, monkeypatch):
    raw, dist = tmp_path / "raw", tmp_path / "dist"
    raw.mkdir(), dist.mkdir()
    _wheel(raw / "x-1-cp311-cp311-linux_x86_64.whl")
    monkeypatch.setenv("BUILDER_WHEEL_PLAT", "auto")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert audit.main([str(raw), str(dist), str(tmp_path)]) == audit.REFUSED_EXIT
    message, hint = (tmp_path / audit.ERROR_FILE).read_text().splitlines()
    assert message == "auditwheel is not installed in the build image"
    assert "[python] requirements" in hint and not list(dist.iterdir())


def test_two_wheels_are_refused(tmp_path, monkeypatch):
    raw, dist = tmp_path / "raw", tmp_path / "dist"
    raw.mkdir(), dist.mkdir()
    _wheel(raw / "x-1-py3-none-any.whl"), _wheel(raw / "y-1-py3-none-any.whl")
    assert audit.main([str(raw), str(dist), str(tmp_path)]) == audit.REFUSED_EXIT
    assert (tmp_path / audit.ERROR_FILE).read_text().startswith("the build produced 2 wheels, expected 1\n")


def test_the_script_carries_the_audit_source_and_the_env_its_settings():
    source = (Path(audit.__file__)).read_text()
    lines = audit_lines()
    assert lines[1].endswith(f"<<'BUILDER_AUDIT'\n{source}BUILDER_AUDIT")  # the key follows the audit's code
    ctx = BuildContext(jobs=1, source_date_epoch=0, plat="manylinux_2_28", external_libs="refuse")
    assert get_recipe("torch").audit_env(ctx) == {"BUILDER_WHEEL_PLAT": "manylinux_2_28",
                                                  "BUILDER_EXTERNAL_LIBS": "refuse", "BUILDER_AUDIT_EXCLUDE": ""}
    assert get_recipe("torchvision").audit_env(ctx)["BUILDER_AUDIT_EXCLUDE"] == " ".join(TORCH_LIBRARIES)
    assert "BUILDER_AUDIT" in get_recipe("torch").script(ctx)


def test_the_audit_is_a_phase_of_its_own():
    marks = "started\t10.5\nprepared\t11\nbuilt\t20\naudited\t21.5\n"
    assert container_phases(marks, 10.0, 22.0) == {"container start": 0.5, "prepare": 0.5, "build command": 9.0,
                                                   "audit": 1.5, "container end": 0.5}


def test_the_record_takes_the_policy_from_the_repaired_tag_not_from_show():
    """An extension's repaired wheel: torch's libraries (excluded) are not found beside it,
    so `show` says "linux" (measured on torch-spline-conv against torch 2.13.0)."""
    after = {"overall_tag": "linux_x86_64", "sym_tag": "manylinux_2_24_x86_64", "versioned_symbols": FIXTURE_TORCH}
    record = audit.audit_record("x-1-cp311-cp311-manylinux_2_24_x86_64.whl", after, POLICIES, "x86_64", [],
                                ["libtorch.so*"])
    assert record == {"policy": "manylinux_2_24", "tag": "manylinux_2_24_x86_64", "audited": True,
                      "limited_by": ["CXXABI_1.3.9 (libstdc++.so.6)", "GLIBCXX_3.4.21 (libstdc++.so.6)"],
                      "vendored": [], "excluded": ["libtorch.so*"]}


@pytest.mark.parametrize(("external", "shows"), [({}, 1), ({"libbz2.so.1.0": "/usr/lib/libbz2.so.1.0"}, 2)])
def test_the_repaired_wheel_is_read_again_only_when_libraries_were_vendored(tmp_path, monkeypatch, external, shows):
    """Repair that vendors nothing only retags (no ELF file patched): the first `show`
    stands for the repaired wheel. Vendored libraries change the wheel: it is read again.
    auditwheel itself runs in tests/integration/test_audit.py; here its answers are given."""
    raw, dist = tmp_path / "raw", tmp_path / "dist"
    raw.mkdir(), dist.mkdir()
    _wheel(raw / "x-1-cp311-cp311-linux_x86_64.whl")
    calls: list[str] = []
    show = {"sym_tag": "manylinux_2_24_x86_64", "versioned_symbols": FIXTURE_TORCH, "external_libs": external}

    def fake_auditwheel(*args: str):
        calls.append(args[0])
        if args[0] == "repair":
            _wheel(Path(args[2]) / "x-1-cp311-cp311-manylinux_2_24_x86_64.whl")
            return audit.subprocess.CompletedProcess(args, 0, "", "")
        return audit.subprocess.CompletedProcess(args, 0, json.dumps(show), "")

    monkeypatch.setattr(audit, "_auditwheel", fake_auditwheel)
    monkeypatch.setattr(audit, "_policies", lambda family: POLICIES)
    record = audit.audit(raw, dist, tmp_path, "auto", "vendor", [])
    assert calls == ["show", "repair", *(["show"] if shows == 2 else [])]
    assert record["tag"] == "manylinux_2_24_x86_64" and record["vendored"] == sorted(external)
    assert record["limited_by"] == ["CXXABI_1.3.9 (libstdc++.so.6)", "GLIBCXX_3.4.21 (libstdc++.so.6)"]
