"""Real PyTorch/XLA wheels from PyPI: fetch, pairing, the lazy-execution smoke check and
`builder xla-check`, against the real Docker daemon.

The wheels (torch 2.9.0, torch_xla 2.9.0 and torch's nvidia-* dependencies, about 4 GB)
are downloaded once per machine into a cache dir outside the repo
(``$BUILDER_TEST_DOWNLOADS``, default /var/cache/builder-tests/downloads) that later
runs reuse; the smoke image (``builder/smoke:<key>``, several GB) is built once per key
and kept. Each run gets a fresh data dir and index, so the "empty index" path is the one
tested every time; the index (a 4 GB copy) is removed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest
import requests

from builder.examples import write_example_repo
from tests.conftest import REPO, leftover_containers, run_builder, write_config

pytestmark = pytest.mark.docker

SCRIPTS = REPO / "tests" / "data" / "xla_scripts"
PAIR = ("--torch", "2.9.0", "--xla", "2.9.0")


def downloads_dir() -> Path:
    path = Path(os.environ.get("BUILDER_TEST_DOWNLOADS", "/var/cache/builder-tests/downloads"))
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    return Path.home() / ".cache" / "builder-tests" / "downloads"


def snapshot(directory: Path) -> dict[str, int]:
    """Every file of the download cache with its mtime: a download would change it."""
    return {str(p.relative_to(directory)): p.stat().st_mtime_ns for p in directory.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("realxla")
    cache = downloads_dir()
    volume = f"builder-test-realxla-{uuid.uuid4().hex[:8]}"
    cfg = write_config(root / "builder.toml", root / "data",
                       f'[prebuilt]\ndownload_cache = "{cache}"\n'
                       f'[cache]\nccache = "volume:{volume}"\nbazel = "volume:{volume}-bazel"\n')
    yield {"cfg": cfg, "root": root, "data": root / "data", "index": root / "data" / "index", "cache": cache}
    shutil.rmtree(root / "data" / "index", ignore_errors=True)  # 4 GB of copies; the cache stays
    shutil.rmtree(root / "data" / "src", ignore_errors=True)
    engine.remove_volume(volume)
    engine.remove_volume(f"{volume}-bazel")


def wheels(env, *args, check=True):
    done = run_builder("wheels", *args, "--json", config=env["cfg"])
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_mismatched_pair_is_refused_before_any_download(env):
    before, data = snapshot(env["cache"]), snapshot(env["data"]) if env["data"].exists() else {}
    done = wheels(env, "--torch", "2.13.0", "--xla", "2.9.0", check=False)
    assert done.returncode != 0
    assert "torch_xla 2.9.0 is built for torch 2.9.*, not torch 2.13.0" in done.stderr
    assert "--torch 2.9.0" in done.stderr
    fetched = run_builder("index", "fetch", "torch==2.13.0", "torch_xla==2.9.0", config=env["cfg"])
    assert fetched.returncode != 0 and "built for torch 2.9.*" in fetched.stderr
    assert snapshot(env["cache"]) == before
    # nothing published, no fetch log written (whether or not the cold run came first)
    assert (snapshot(env["data"]) if env["data"].exists() else {}) == data


@pytest.fixture(scope="module")
def cold(env):
    """`builder wheels --torch 2.9.0 --xla 2.9.0` on an empty index: (report, stderr, the
    index listing right after it; later tests add the fixture xla to the same index)."""
    assert not (env["index"] / "files").exists()
    done = wheels(env, *PAIR)
    listed = run_builder("index", "list", "--json", config=env["cfg"], check=True)
    return json.loads(done.stdout), done.stderr, {e["filename"]: e for e in json.loads(listed.stdout)}


def test_cold_run_fetches_both_wheels_and_deps_with_hashes_checked(cold):
    report, stderr, entries = cold
    steps = {w["recipe"]: w for w in report["wheels"]}
    assert steps["torch"]["status"] == "prebuilt" and steps["torch"]["filename"].startswith("torch-2.9.0-")
    assert steps["xla"]["status"] == "prebuilt" and steps["xla"]["filename"].startswith("torch_xla-2.9.0-")
    names = {e["normalized"] for e in entries.values()}
    assert {"torch", "torch-xla", "nvidia-cudnn-cu12", "triton", "numpy", "absl-py", "sympy"} <= names
    for name, entry in entries.items():  # what the index stored == what the upstream page said
        assert entry["sha256"] == entry["manifest"]["prebuilt"]["upstream_sha256"], name
    # An independent look at PyPI's page (PEP 691 JSON) for the two big ones.
    for project, step in (("torch", steps["torch"]), ("torch-xla", steps["xla"])):
        page = requests.get(f"https://pypi.org/simple/{project}/", timeout=120,
                            headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        page.raise_for_status()
        digests = {f["filename"]: f["hashes"]["sha256"] for f in page.json()["files"]}
        assert digests[step["filename"]] == step["sha256"]
    assert "torch 2.9.0:" in stderr and "torch_xla 2.9.0:" in stderr  # fetch summaries


def test_cold_run_smoke_is_lazy(cold):
    report, _, _ = cold
    assert report["smoke"] == "passed"  # a fresh data dir holds no smoke record: measured now
    smoke = report["smoke_figures"]
    figures = smoke["figures"]
    assert figures["steps"] == 6
    assert figures["compiles"] == 1 and figures["uncached_compiles"] == 1 and figures["cached_compiles"] == 5
    assert figures["executions"] == 6
    assert figures["transfers_from_device"] == 0
    assert figures["fallbacks"] == {}
    assert figures["torch"].startswith("2.9.0") and figures["torch_xla"].startswith("2.9.0")
    assert smoke["image"].startswith("builder/smoke:") and smoke["problems"] == []


def test_smoke_figures_are_in_the_torch_xla_manifest(env, cold):
    report, _, _ = cold
    xla = next(w for w in report["wheels"] if w["project"] == "torch_xla")
    manifest = json.loads((env["index"] / "files" / f"{xla['filename']}.manifest.json").read_text())
    assert manifest["xla_smoke"]["figures"]["compiles"] == 1
    assert manifest["xla_smoke"]["figures"]["executions"] == 6


def test_rerun_is_a_noop_and_force_smoke_runs_again(env, cold, engine):
    before = snapshot(env["cache"])
    report = json.loads(wheels(env, *PAIR).stdout)
    assert [w["status"] for w in report["wheels"]] == ["prebuilt", "prebuilt"]
    assert report["smoke"] == "reused" and report["smoke_figures"]["figures"]["compiles"] == 1
    assert snapshot(env["cache"]) == before  # nothing downloaded
    fetched = run_builder("index", "fetch", "torch==2.9.0", "torch_xla==2.9.0", "--json", config=env["cfg"])
    assert fetched.returncode == 0, fetched.stderr
    result = json.loads(fetched.stdout)
    assert result["offline"] and result["downloaded_bytes"] == 0
    assert {w["status"] for w in result["wheels"]} == {"present"}
    assert snapshot(env["cache"]) == before
    forced = json.loads(wheels(env, *PAIR, "--force-smoke").stdout)
    assert forced["smoke"] == "passed" and forced["smoke_figures"]["image_reused"]
    assert forced["smoke_figures"]["run_seconds"] > 0
    assert engine.image_id(forced["smoke_figures"]["image"]) is not None
    assert leftover_containers(engine, env) == []  # this module's only: other runs may share the daemon


def xla_check(env, script: str, *args: str, scripts: Path = SCRIPTS):
    done = run_builder("xla-check", "--json", *args, str(scripts / script), config=env["cfg"])
    return done, (json.loads(done.stdout) if done.stdout.strip() else None)


def words(finding: dict) -> str:
    return f"{finding['summary']} {finding['hint']}"


def test_xla_check_clean_script_has_no_finding(env, cold):
    done, report = xla_check(env, "clean.py", "--strict")
    assert done.returncode == 0, done.stderr[-2000:]
    assert report["findings"] == []
    assert report["figures"]["compiles"] == 1 and report["figures"]["executions"] == 6
    assert report["figures"]["steps"] == 6
    assert "trained 6 steps" in done.stderr  # the script's own output is shown
    assert "Execution Analysis" not in done.stderr  # torch_xla's wall only in the log
    assert "Execution Analysis" in Path(report["log"]).read_text()


def test_xla_check_item_in_loop_is_a_host_sync_at_its_line(env, cold):
    done, report = xla_check(env, "item_in_loop.py", "--strict")
    assert done.returncode == 1  # --strict: a finding fails
    (finding,) = report["findings"]
    assert finding["kind"] == "host-sync" and finding["count"] == 6
    assert finding["location"] == f"{SCRIPTS / 'item_in_loop.py'}:20"
    assert (finding["steps"], finding["frequency"], finding["severity"]) == (6, 1.0, "error")
    assert finding["summary"] == "6 host reads in 6 steps, on every step"
    assert ".item()" in finding["hint"]


def test_xla_check_read_every_4th_step_is_a_warning(env, cold):
    done, report = xla_check(env, "read_every_4th.py", "--strict")
    assert done.returncode == 0, done.stderr[-2000:]  # --strict: errors only
    (finding,) = report["findings"]
    assert (finding["kind"], finding["location"], finding["count"]) == \
        ("host-sync", f"{SCRIPTS / 'read_every_4th.py'}:21", 3)
    assert (finding["steps"], finding["frequency"], finding["severity"]) == (12, 0.25, "warning")
    assert finding["summary"] == "3 host reads in 12 steps, every 4th step"
    assert "every step" not in words(finding)
    assert "xm.add_step_closure" in finding["hint"] and "every N steps" not in finding["hint"]
    gated, _ = xla_check(env, "read_every_4th.py", "--strict=warning")
    assert gated.returncode == 1
    assert "--strict=warning: 1 finding(s) at warning or worse" in gated.stderr


def test_xla_check_read_after_the_loop_is_info(env, cold):
    done, report = xla_check(env, "read_after_loop.py", "--strict")
    assert done.returncode == 0, done.stderr[-2000:]
    (finding,) = report["findings"]
    assert (finding["kind"], finding["severity"], finding["count"], finding["steps"]) == ("host-sync", "info", 1, 6)
    assert finding["summary"] == "1 host read in 6 steps, after the last step"


def test_xla_check_changing_shapes_is_recompilation(env, cold):
    done, report = xla_check(env, "changing_shapes.py")
    assert done.returncode == 0
    (finding,) = report["findings"]
    assert finding["kind"] == "recompilation" and finding["count"] == 6
    assert (finding["steps"], finding["frequency"], finding["severity"]) == (6, 1.0, "error")
    assert finding["location"] == f"{SCRIPTS / 'changing_shapes.py'}:19"


def test_xla_check_op_without_lowering_is_a_named_fallback(env, cold):
    done, report = xla_check(env, "no_lowering.py")
    assert done.returncode == 0
    fallbacks = {f["detail"]: f for f in report["findings"] if f["kind"] == "cpu-fallback"}
    assert "aten::linalg_eig" in fallbacks
    assert fallbacks["aten::linalg_eig"]["location"] == f"{SCRIPTS / 'no_lowering.py'}:18"
    assert fallbacks["aten::linalg_eig"]["count"] == 6
    assert (fallbacks["aten::linalg_eig"]["frequency"], fallbacks["aten::linalg_eig"]["severity"]) == (1.0, "error")
    strict, _ = xla_check(env, "no_lowering.py", "--strict")
    assert strict.returncode == 1


def test_xla_check_loop_without_barrier_is_an_error(env, cold):
    scripts = REPO / "tests" / "data" / "xla_check"
    done, report = xla_check(env, "no_sync.py", "--strict", scripts=scripts)
    assert done.returncode == 1
    by_kind = {f["kind"]: f for f in report["findings"]}
    assert by_kind["no-sync"]["severity"] == "error" and by_kind["no-sync"]["steps"] == 0
    assert by_kind["no-sync"]["frequency"] is None
    assert by_kind["no-mpdeviceloader"]["severity"] == "warning" and by_kind["no-mpdeviceloader"]["count"] == 12
    assert by_kind["host-sync"]["severity"] == "info"  # the final read after the loop


def test_fixture_xla_builds_against_the_fetched_torch(env, cold, engine, tmp_path):
    """The prebuilt-torch path with a torch other than the on-disk 2.13.0: the
    torch.utils.cpp_extension fixture compiled against torch 2.9.0 from the index, then
    run against that torch in the smoke image (which has it installed). --no-smoke: the
    pipeline's own check of such a wheel (an import, after installing 4 GB again) is
    covered by tests/unit/test_xla_findings.py::test_wheel_smoke_*."""
    from builder.engine import ContainerSpec, Mount

    repo = write_example_repo("xla_real_ext", tmp_path / "xla_real_ext")
    report = json.loads(wheels(env, "--torch", "2.9.0", "--xla", "main", "--xla-repo", f"file://{repo}",
                               "--no-smoke").stdout)
    steps = {w["recipe"]: w for w in report["wheels"]}
    torch_sha = steps["torch"]["sha256"]
    assert steps["torch"]["status"] == "prebuilt" and steps["torch"]["filename"].startswith("torch-2.9.0-")
    assert steps["xla"]["status"] == "built"
    assert steps["xla"]["filename"].startswith("torch_xla_real_ext-2.9.0+git")  # pairs with torch 2.9
    manifest = json.loads((env["index"] / "files" / (steps["xla"]["filename"] + ".manifest.json")).read_text())
    assert manifest["against_sha256"] == [torch_sha]
    script = ("PIP_CONFIG_FILE=/dev/null pip install -q --no-cache-dir --no-deps --index-url file:///index/simple/ "
              f"'torch_xla_real_ext=={steps['xla']['version']}' && cd /tmp && python -c 'import torch, "
              "torch_xla_real_ext as ext; print(torch.__version__, ext.add_twice(torch.ones(3), torch.ones(3)))'")
    result = engine.run(ContainerSpec(image=cold[0]["smoke_figures"]["image"], command=["sh", "-c", script],
                                      network="none", mounts=[Mount(str(env["index"]), "/index", read_only=True)]))
    assert result.exit_code == 0, result.output[-2000:]
    assert "2.9.0+cu128 tensor([3., 3., 3.])" in result.output
