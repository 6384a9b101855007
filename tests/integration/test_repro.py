"""Reproducibility end to end on the faketorch fixture, against the real daemon:
deterministic wheels, `builder verify`, provenance manifests and their schema, secrets
kept out of manifests, image history and logs, `builder lock` and `wheels --locked`.

Kept lean: three compiles in all (the build, a verify rebuild that is also the second
build from another data dir with an empty ccache, and the verify of a tampered wheel);
the lock tests fail or reuse before compiling.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import jsonschema
import pytest

from builder.examples import commit_change, head_sha, write_example_repo
from builder.repro.lockfile import LOCK_VERSION
from builder.repro.manifest import SCHEMA_PATH, validate_manifest
from tests.conftest import dead_pid, own_base, run_builder, wait_for_container, write_config

pytestmark = pytest.mark.docker

TOKEN = "s3cr3t-planted-" + uuid.uuid4().hex[:8]
PASSWORD = "index-pw-planted-" + uuid.uuid4().hex[:8]
# BUILDER_* names are settings (an unknown one is an error), so the token is planted under
# another secret-looking name; the index password is the real BUILDER_INDEX_PASSWORD.
SECRETS_ENV = {"CI_DEPLOY_TOKEN": TOKEN, "BUILDER_INDEX_PASSWORD": PASSWORD}


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    """Two configs on a base tag of the module's own (tests/conftest.py own_base): a test
    below removes its deps layer, which must not be one other tests build on."""
    with own_base(engine, base_image, "repro-test") as base:
        yield from module_env(tmp_path_factory, engine, base)


def module_env(tmp_path_factory, engine, base: str):
    root = tmp_path_factory.mktemp("repro")
    repo = write_example_repo("faketorch", root / "repos" / "faketorch")
    volume = f"builder-test-repro-{uuid.uuid4().hex[:8]}"
    configs = {}
    for name in ("a", "b"):  # two data dirs: other checkout paths, other ccache volumes
        configs[name] = write_config(root / f"builder-{name}.toml", root / f"data-{name}",
                                     f'[cache]\nccache = "volume:{volume}-{name}"\nbazel = "volume:{volume}-bazel"\n'
                                     f'[repos]\ntorch = "file://{repo}"\n[build]\njobs = 2\n', base=base)
    yield {"root": root, "repo": repo, "cfg": configs["a"], "cfg_b": configs["b"],
           "data": root / "data-a", "data_b": root / "data-b", "index": root / "data-a" / "index"}
    for suffix in ("a", "b", "bazel"):
        engine.remove_volume(f"{volume}-{suffix}")


@pytest.fixture(scope="module")
def built(env):
    """One cold build of faketorch with secrets planted in the builder's environment."""
    done = run_builder("wheels", "--torch", "main", "--no-smoke", "--json", config=env["cfg"], env=SECRETS_ENV)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (env["root"] / "wheels-a.log").write_text(done.stdout + done.stderr)
    wheel = report["wheels"][0]
    assert wheel["status"] == "built"
    return {"report": report, "wheel": wheel, "path": env["index"] / "files" / wheel["filename"],
            "manifest_path": env["index"] / "files" / f"{wheel['filename']}.manifest.json"}


def verify(env, wheel, config, *extra):
    done = run_builder("verify", wheel, "--dir", str(env["index"]), "--json", *extra, config=config,
                       env=SECRETS_ENV)
    results = json.loads(done.stdout) if done.stdout.strip() else []
    return done, results


def test_manifest_is_provenance_and_validates_against_the_schema(built):
    manifest = json.loads(built["manifest_path"].read_text())
    jsonschema.validate(manifest, json.loads(SCHEMA_PATH.read_text()))  # the schema kept in the repo
    validate_manifest(manifest)
    assert manifest["subject"] == [{"name": built["wheel"]["filename"],
                                    "digest": {"sha256": built["wheel"]["sha256"]}}]
    assert manifest["build_key"] == built["wheel"]["key"]
    materials = {m["name"]: m for m in manifest["predicate"]["buildDefinition"]["resolvedDependencies"]}
    assert materials["source"]["digest"]["gitCommit"] == built["wheel"]["source_sha"]
    assert "submodule:third_party/fakefmt" in materials
    stages = {s["name"]: s for s in built["report"]["stages"]}
    for name in ("base", "toolchain", "python"):
        assert materials[f"image:{name}"]["digest"]["sha256"] == stages[name]["image_id"].split(":")[1]
        assert materials[f"image:{name}"]["annotations"]["key"] == stages[name]["key"]
    run = manifest["predicate"]["runDetails"]
    assert run["compilers"]["gcc"].startswith("gcc (Debian 12.2.0") and "14.0.6" in run["compilers"]["clang"]
    assert run["sourceDateEpoch"] == 1704067200  # the fixture's commit time
    assert run["ccache"]["misses"] > 0


def test_wheel_is_normalized(built):
    with zipfile.ZipFile(built["path"]) as zf:
        infos = zf.infolist()
    assert {i.date_time for i in infos} == {(2024, 1, 1, 0, 0, 0)}
    assert infos[-1].filename.endswith(".dist-info/RECORD")
    modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in infos}
    assert modes["torch/lib/libtorch_cpu.so"] == 0o755 and modes["torch/__init__.py"] == 0o644


def test_planted_secrets_are_in_no_manifest_image_history_or_log(env, built, engine):
    texts = {str(built["manifest_path"]): built["manifest_path"].read_text()}
    for log in (env["data"] / "logs").rglob("*"):
        if log.is_file():
            texts[str(log)] = log.read_text(errors="replace")
    texts["builder output"] = (env["root"] / "wheels-a.log").read_text()
    images = [s["tag"] for s in built["report"]["stages"]] + ["builder/debian:bookworm-minbase"]
    for tag in images:
        history = subprocess.run(["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", tag],
                                 capture_output=True, text=True, check=True).stdout
        assert history.strip() or tag == "builder/debian:bookworm-minbase", tag  # an imported rootfs: no steps
        texts[f"docker history {tag}"] = history
        texts[f"labels {tag}"] = json.dumps(engine.image_labels(tag))
    assert len(texts) > 5
    for where, text in texts.items():
        assert TOKEN not in text and PASSWORD not in text, where


def test_second_build_elsewhere_with_empty_ccache_is_identical_and_verify_passes(env, built, engine):
    """`builder verify` run from the second data dir: a fresh checkout at another path, a
    new empty ccache volume (removed afterwards), the same sha256 as the first build."""
    done, results = verify(env, built["wheel"]["filename"], env["cfg_b"])
    assert done.returncode == 0, done.stderr
    [result] = results
    assert result["ok"] and result["rebuilt"] == result["recorded"] == built["wheel"]["sha256"]
    assert "rebuilding in" in done.stderr and "with empty caches" in done.stderr
    checkout_line = next(line for line in done.stderr.splitlines() if "checking out" in line)
    assert str(env["data_b"] / "verify") in checkout_line  # another checkout path than data-a/src/torch
    log = (env["data_b"] / "logs" / "verify" / f"{built['wheel']['filename']}.log").read_text()
    assert TOKEN not in log and PASSWORD not in log
    # its two empty cache volumes removed: this data dir's (test_audit's verify may run meanwhile,
    # and a verify killed on this machine before leaves its own until its data dir runs again)
    assert engine.client.volumes.list(filters={"label": f"builder.scratch-of={env['data_b']}"}) == []
    assert not list((env["data_b"] / "verify").glob("rebuild-*"))  # scratch tree removed


def test_sigkilled_verify_leaves_scratch_and_volumes_that_the_next_verify_removes(env, built, engine):
    """A kill -9 mid-rebuild: its container, scratch dir and two empty cache volumes stay;
    the next verify in that data dir removes them (not another host's, which it cannot
    tell is gone), then verifies."""
    wheel = built["wheel"]["filename"]
    other_host = {"builder": "1", "builder.pid": str(dead_pid()), "builder.host": "another-host"}
    foreign_volume = f"builder-test-otherhost-{uuid.uuid4().hex[:8]}"
    engine.client.volumes.create(foreign_volume, labels=other_host)
    foreign_dir = env["data_b"] / "verify" / f"rebuild-otherhost-{uuid.uuid4().hex[:8]}"
    foreign_dir.mkdir(parents=True)
    (foreign_dir / ".builder-owner").write_text(f"another-host {other_host['builder.pid']}\n")
    proc = subprocess.Popen([sys.executable, "-m", "builder", "--config", str(env["cfg_b"]), "verify", wheel,
                             "--dir", str(env["index"])], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_container(engine, proc, timeout=300)
        proc.send_signal(signal.SIGKILL)  # our own builder process, by its pid: nothing can clean up
        proc.communicate(timeout=60)
        mine = {"label": f"builder.pid={proc.pid}"}
        containers = [c.name for c in engine.client.containers.list(all=True, filters=mine)]
        volumes = sorted(v.name for v in engine.client.volumes.list(filters=mine))
        scratch = [p for p in (env["data_b"] / "verify").glob("rebuild-*") if p != foreign_dir]
        assert len(containers) == 1 and len(scratch) == 1  # what a kill -9 leaves
        assert volumes == sorted([volumes[0], f"{volumes[0]}-bazel"]) and volumes[0].startswith("builder-verify-")
        done, results = verify(env, wheel, env["cfg_b"])
        assert done.returncode == 0, done.stderr
        assert results[0]["ok"]
        assert f"removed container {containers[0]} left behind by an interrupted earlier run" in done.stderr
        assert f"removed the scratch dir {scratch[0]} of an interrupted `builder verify`" in done.stderr
        for name in volumes:
            assert f"removed volume {name} left behind by an interrupted earlier run" in done.stderr
        assert engine.client.containers.list(all=True, filters=mine) == []
        assert engine.client.volumes.list(filters=mine) == [] and not scratch[0].exists()
        assert engine.volume_exists(foreign_volume) and foreign_dir.is_dir()  # another host's: kept
    finally:
        if proc.poll() is None:
            proc.kill()
        engine.remove_volume(foreign_volume)
        shutil.rmtree(foreign_dir, ignore_errors=True)


def test_verify_fails_on_a_tampered_wheel_and_names_the_file(env, built):
    path = built["path"]
    original = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("torch/lib/libtorch_cpu.so")
    offset = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + info.compress_size // 2
    tampered = bytearray(original)
    tampered[offset] ^= 0x01
    path.write_bytes(bytes(tampered))
    try:
        done, results = verify(env, built["wheel"]["filename"], env["cfg"])
    finally:
        path.write_bytes(original)
    assert done.returncode == 1, done.stderr
    [result] = results
    assert not result["ok"] and result["rebuilt"] == result["recorded"] != result["published"]
    assert [d.split(":")[0] for d in result["differences"]] == ["torch/lib/libtorch_cpu.so"]
    assert "differs: torch/lib/libtorch_cpu.so: content differs" in done.stderr
    assert "NOT reproduced: the published file" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: 1 of 1 wheel(s) did not verify")


@pytest.fixture(scope="module")
def lock_file(env, built):
    path = env["root"] / "builder.lock"
    done = run_builder("lock", "--torch", "main", "--out", str(path), config=env["cfg"])
    assert done.returncode == 0, done.stderr
    return path


def test_lock_records_packages_hashes_and_sources(lock_file, built):
    lock = json.loads(lock_file.read_text())
    stages = lock["stages"]
    assert list(stages) == ["base", "python", "toolchain"]  # sorted keys
    assert stages["toolchain"]["apt"]["gcc-12"] == "12.2.0-14+deb12u1"
    assert "cpp-12" in stages["toolchain"]["apt"]  # pulled in, not named in builder.toml
    assert stages["base"]["apt"]["ca-certificates"] == "20230311+deb12u1"
    # what normalised the wheel (builder.repro.normalize in the build container) is locked:
    # the python stage's python3.11 and zlib1g, the versions the manifest's "normalizer" names
    assert stages["python"]["apt"]["python3.11"] == "3.11.2-6+deb12u8"
    assert stages["python"]["apt"]["zlib1g"] == "1:1.2.13.dfsg-1"
    normalizer = json.loads(built["manifest_path"].read_text())["normalizer"]
    assert normalizer == {"version": "2", "python": "3.11.2", "zlib": "1.2.13"}
    pip = stages["python"]["pip"]
    assert pip["setuptools"]["version"] == "80.9.0" and len(pip["setuptools"]["sha256"]) == 64
    assert pip["wheel"]["sha256"] and pip["packaging"]["sha256"]
    assert lock["base"]["image_id"].startswith("sha256:") and lock["base"]["apt"]
    assert lock["sources"]["torch"]["sha"] == built["wheel"]["source_sha"]
    for name, stage in stages.items():
        assert stage["image_id"] == next(s["image_id"] for s in built["report"]["stages"] if s["name"] == name)
    # The deps layer of the locked commit: what its requirements installed, hashed where it added them.
    deps = lock["deps"]["torch"]
    assert deps["image_id"] == next(s["image_id"] for s in built["report"]["stages"] if s["name"] == "deps")
    assert len(deps["pip"]["scikit-build-core"]["sha256"]) == 64 and len(deps["pip"]["cmake"]["sha256"]) == 64
    assert deps["pip"]["wheel"]["sha256"] == ""  # the python stage's, unchanged: pinned there
    # What decides the wheels' platform tag: the [wheels] settings and the auditwheel that ran.
    assert lock["wheels"] == {"plat": "auto", "external_libs": "vendor", "auditwheel": "6.8.2"}
    assert len(pip["auditwheel"]["sha256"]) == 64


def test_locked_build_reuses_what_matches_the_lock(env, built, lock_file):
    done = run_builder("wheels", "--torch", "main", "--no-smoke", "--json", "--locked", "--lock-file",
                       str(lock_file), config=env["cfg"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert all(s["reused"] for s in report["stages"])
    assert report["wheels"][0]["status"] == "reused" and report["wheels"][0]["sha256"] == built["wheel"]["sha256"]


def test_locked_deps_layer_is_rebuilt_from_hashed_pins(env, built, lock_file, engine):
    from builder.engine import ContainerSpec

    lock = json.loads(lock_file.read_text())
    plain = lock["deps"]["torch"]["tag"]
    aside = f"{plain}-aside"  # the module's other tests (any order) verify against the plain layer
    engine.tag(plain, aside)
    engine.remove_image(plain)  # the tag only (the image stays under `aside`): as on a machine that never built it
    try:
        done = run_builder("wheels", "--torch", "main", "--no-smoke", "--json", "--locked", "--lock-file",
                           str(lock_file), config=env["cfg"])
    finally:
        engine.tag(aside, plain)
        engine.remove_image(aside)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    deps = next(s for s in report["stages"] if s["name"] == "deps")
    # Not the plain layer (removed above) but the one rendered from the lock's hashed pins (built now, or
    # reused when an earlier run on this daemon built the same pinned recipe).
    assert deps["tag"] != lock["deps"]["torch"]["tag"]
    pins = engine.run(ContainerSpec(image=deps["tag"], command=["cat", "/opt/venv/builder-deps-lock.txt"],
                                    network="none")).output
    want = lock["deps"]["torch"]["pip"]["scikit-build-core"]
    assert f"scikit-build-core=={want['version']} --hash=sha256:{want['sha256']}" in pins
    # A wheel's key chains on its deps image's ID, and this layer is another image (it holds the
    # pin file): the wheel is built anew, and from the same pinned versions it is the same bytes.
    [wheel] = report["wheels"]
    assert wheel["status"] == "built" and wheel["key"] != built["wheel"]["key"]
    assert wheel["sha256"] == built["wheel"]["sha256"]


def test_locked_with_a_version_that_does_not_exist_fails_before_compiling(env, built, lock_file):
    lock = json.loads(lock_file.read_text())
    base_apt, toolchain_apt = lock["stages"]["base"]["apt"], lock["stages"]["toolchain"]["apt"]
    package = "cpp-12" if "cpp-12" not in base_apt else next(p for p in toolchain_apt if p not in base_apt)
    for stage in ("toolchain", "python"):
        lock["stages"][stage]["apt"][package] = "99.99-nonexistent1"
    bad = env["root"] / "bad.lock"
    bad.write_text(json.dumps(lock))
    files_before = sorted(p.name for p in (env["index"] / "files").iterdir())
    done = run_builder("wheels", "--torch", "main", "--no-smoke", "--locked", "--lock-file", str(bad),
                       config=env["cfg"])
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: stage toolchain: builder.lock pins versions the package source no longer has")
    assert f"E: Version '99.99-nonexistent1' for '{package}' was not found" in last
    assert "checking out" not in done.stderr and "building in" not in done.stderr  # nothing compiled
    assert sorted(p.name for p in (env["index"] / "files").iterdir()) == files_before


def test_locked_with_a_moved_ref_fails_before_anything(env, built, lock_file):
    head = head_sha(env["repo"])
    moved = commit_change(env["repo"], "csrc/kernels/kernel_002.cpp")
    try:
        done = run_builder("wheels", "--torch", "main", "--no-smoke", "--locked", "--lock-file", str(lock_file),
                           config=env["cfg"])
    finally:
        subprocess.run(["git", "-C", str(env["repo"]), "reset", "-q", "--hard", head], check=True)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: torch: ref main moved: it is now {moved[:12]}, builder.lock has {head[:12]}; build the locked "
        f"commit (--torch {head}) or accept the new one with `builder lock --torch main`")


def test_locked_with_other_wheels_settings_fails_before_anything(env, built, lock_file):
    files_before = sorted(p.name for p in (env["index"] / "files").iterdir())
    done = run_builder("wheels", "--torch", "main", "--no-smoke", "--locked", "--lock-file", str(lock_file),
                       config=env["cfg"], env={"BUILDER_WHEELS_PLAT": "manylinux_2_28"})
    assert done.returncode == 1
    assert done.stderr.strip() == ("error: [wheels] differs from builder.lock: plat 'manylinux_2_28' (lock: 'auto'); "
                                   "set [wheels] as the lock has it, or run `builder lock` again with these settings")
    assert sorted(p.name for p in (env["index"] / "files").iterdir()) == files_before


def test_lock_errors_are_clear(env, tmp_path):
    done = run_builder("wheels", "--torch", "main", "--locked", "--lock-file", str(tmp_path / "none.lock"),
                       config=env["cfg"])
    assert done.returncode == 1
    assert done.stderr.strip().startswith(f"error: cannot read the lock file {tmp_path / 'none.lock'}")
    garbage = Path(tmp_path / "garbage.lock")
    garbage.write_text("{}")
    done = run_builder("wheels", "--torch", "main", "--locked", "--lock-file", str(garbage), config=env["cfg"])
    assert done.returncode == 1
    assert done.stderr.strip() == (f"error: {garbage}: lock format None, this builder reads {LOCK_VERSION}; "
                                   "re-create it with `builder lock`")
