"""`builder wheels --torch 2.13.0 --tpu VERSION` end to end, against the real Docker daemon.

torch is the real CPU torch 2.13.0 wheel of this machine's find-links dir, imported with
`builder index add` (its dependencies from PyPI, through the default [prebuilt]); torch_tpu
and libtpu are the fixtures of tests/helpers_tpu.py (upstream's loader rule, a fake
libtpu) in a static PEP 503 index served over HTTP on 127.0.0.1, which the second config's
[prebuilt] index_url names. Both configs share one data dir. The refusals run first, so
"nothing published" is checked against an index that holds torch alone.

The real torch-tpu 0.2.0 (96 MB; about 1.9 GB installed with libtpu and its other
dependencies) is not fetched here: see the README section "torch_xla or TorchTPU" for the
command that runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from builder.examples import commit_change, write_example_repo
from tests.conftest import run_builder, tree, write_config
from tests.helpers_tpu import libtpu_wheel, serve, torch_tpu_wheel, truncate, write_index

pytestmark = pytest.mark.docker

FIND_LINKS = Path(os.environ.get("PIP_FIND_LINKS", "/opt/wheels"))
TORCH = FIND_LINKS / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
TPU = "torch_tpu-0.91.0-cp311-cp311-manylinux_2_31_x86_64.whl"
LIBTPU = "libtpu-0.0.90-py3-none-any.whl"


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image):
    if not TORCH.is_file():
        pytest.fail(f"{TORCH} is missing: this machine's find-links dir should hold the torch 2.13.0 CPU wheel")
    root = tmp_path_factory.mktemp("tpu")
    wheels = root / "upstream-wheels"
    broken = torch_tpu_wheel(wheels, "0.95.0")
    metadata = truncate(broken)
    write_index(root / "upstream", [torch_tpu_wheel(wheels, "0.91.0"),
                                    torch_tpu_wheel(wheels, "0.92.0", ">=2.12.0,<=2.16.0", ("2.14.0", "2.16.0")),
                                    broken, libtpu_wheel(wheels)], {broken.name: metadata})
    data = root / "data"
    plain = write_config(root / "pypi.toml", data)
    run_builder("index", "add", str(TORCH), config=plain, check=True)  # torch's dependencies from PyPI
    torch_repo = write_example_repo("faketorch", root / "repos" / "faketorch")
    with serve(root / "upstream") as url:
        cfg = write_config(root / "builder.toml", data, f'[prebuilt]\nindex_url = "{url}simple/"\n'
                           f'[repos]\ntorch = "file://{torch_repo}"\n')
        yield {"cfg": cfg, "index": data / "index", "root": root, "torch_repo": torch_repo,
               "index_url": f"{url}simple/"}


def published(env) -> list[str]:
    return sorted(p.name for p in (env["index"] / "files").glob("*.whl"))


def refused(env, *args: str):
    before = tree(env["index"])
    done = run_builder("wheels", *args, config=env["cfg"], timeout=600)
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert tree(env["index"]) == before  # nothing published, whichever tests published before
    return done.returncode, lines[-1]


def test_a_torch_outside_the_range_is_refused_at_planning(env):
    code, line = refused(env, "--torch", "2.10.0", "--tpu", "0.91.0")
    assert code == 2
    assert line.startswith("error: torch_tpu 0.91.0 does not run with torch 2.10.0: torch 2.10.0 is outside its "
                           "Requires-Dist torch<=2.15.0,>=2.11.0; it supports torch<=2.15.0,>=2.11.0 "
                           "(glue for 2.11.0, 2.13.0, 2.15.0); no torch_tpu in the local index or ")
    assert line.endswith("supports torch 2.10.0; or use --torch 2.15.0")


def test_a_torch_main_build_is_refused_before_anything_is_built(env):
    code, line = refused(env, "--torch", "main", "--tpu", "0.91.0")
    assert code == 2
    assert "does not run with torch main (" in line and "version 2.99.0a0): torch 2.99.0a0 is outside" in line


def test_a_wheel_without_the_glue_is_refused(env):
    code, line = refused(env, "--torch", "2.13.0", "--tpu", "0.92.0")
    assert code == 2
    assert "the wheel has no glue for torch 2.13.0: its oldest is 2.14.0" in line
    assert "torch_tpu 0.91.0 is the newest that supports torch 2.13.0 (--tpu 0.91.0)" in line


def test_a_truncated_wheel_is_one_clear_error(env):
    code, line = refused(env, "--torch", "2.13.0", "--tpu", "0.95.0")
    assert code == 1
    assert line.startswith("error: torch_tpu 0.95.0 from http://127.0.0.1:")
    assert "is not a wheel: not a valid zip file" in line and "nothing was published" in line


@pytest.fixture(scope="module")
def run(env):
    done = run_builder("wheels", "--torch", "2.13.0", "--tpu", "0.91.0", "--json", config=env["cfg"])
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done.stderr


def test_publishes_torch_tpu_and_libtpu_and_smokes_the_glue(env, run):
    report, stderr = run
    wheels = {w["recipe"]: w for w in report["wheels"]}
    assert (wheels["torch"]["status"], wheels["torch"]["filename"]) == ("prebuilt", TORCH.name)
    assert (wheels["torch_tpu"]["status"], wheels["torch_tpu"]["filename"]) == ("prebuilt", TPU)
    assert TPU in published(env) and LIBTPU in published(env)
    assert report["plan_deviations"] == []
    [planned] = [w for w in report["plan"]["wheels"] if w["name"] == "torch_tpu"]
    assert planned["status"] == "fetch"
    assert planned["why"].endswith("pairs with torch 2.13.0: glue 2_13_0")
    assert report["smoke"] == "passed"
    figures = report["smoke_figures"]
    assert figures["torch"] == "2.13.0+cpu" and figures["expected_glue"] == "2_13_0"
    assert figures["glue_modules"] == ["env_2_13_0.so"] and figures["wrong_glue"] == {}
    assert figures["entry_point"] == "torch_tpu = torch_tpu._loader:load" and figures["entry_point_loads"]
    assert figures["autoloaded"] is True  # torch 2.13's device-backend autoload found the entry point
    assert figures["note"] == "no TPU: device not exercised" and figures["tpus"] == 0
    assert "torch_tpu smoke: no TPU: device not exercised" in stderr
    shown = json.loads(run_builder("index", "show", TPU, config=env["cfg"], check=True).stdout)
    assert shown["torch_tpu_smoke"]["expected_glue"] == "2_13_0"  # the figures travel with the wheel


def test_index_list_shows_torch_tpu_and_libtpu(env, run):
    listed = json.loads(run_builder("index", "list", "--json", config=env["cfg"], check=True).stdout)
    names = {entry["filename"] for entry in listed}
    assert {TORCH.name, TPU, LIBTPU} <= names


def test_pip_installs_the_pair_from_the_index_alone(env, run, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--disable-pip-version-check",
                           "--index-url", (env["index"] / "simple").as_uri() + "/", "torch", "torch_tpu"],
                          capture_output=True, text=True, env=clean, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = ("import sys, torch; assert 'torch_tpu' in sys.modules; import torch_tpu._internal.env as g, libtpu; "
             "print(torch.__version__, g.BUILT_FOR, g.__spec__.origin.rsplit('/', 1)[-1], libtpu.CONFIGURED)")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, env=clean,
                         cwd=tmp_path, check=True).stdout
    assert out.split("\n")[-2] == "2.13.0+cpu 2.13.0 env_2_13_0.so [True]"


def test_a_second_run_takes_everything_from_the_index(env, run):
    done = run_builder("wheels", "--torch", "2.13.0", "--tpu", "latest", "--json", config=env["cfg"])
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    wheels = {w["recipe"]: w for w in report["wheels"]}
    assert wheels["torch_tpu"]["filename"] == TPU  # latest: 0.92.0 lacks the 2.13 glue, 0.95.0 is truncated
    [planned] = [w for w in report["plan"]["wheels"] if w["name"] == "torch_tpu"]
    assert planned["why"].endswith("glue 2_13_0; passed over 0.95.0: not a readable wheel (latest: the newest "
                                   "that pairs)")
    assert [w["status"] for w in report["plan"]["wheels"]] == ["prebuilt", "prebuilt"]
    assert report["smoke"] == "reused"


def test_a_torch_built_from_a_release_tag_pairs_and_smokes(env, engine):
    """torch built by builder from a release tag (the fixture torch at v2.13.0: version.txt
    2.13.0, as pytorch's release branches set it), not the prebuilt wheel: it pairs with
    torch_tpu 0.91.0 by its public version and the clean-container smoke loads the 2_13_0
    glue against it. Its own data dir and ccache volume: the module's index keeps the prebuilt torch."""
    repo = env["torch_repo"]
    # on a release branch, as upstream tags its releases: main stays 2.99.0a0 for the other tests
    release = commit_change(repo, "version.txt", "2.13.0\n", message="Release 2.13.0", branch="release/2.13")
    subprocess.run(["git", "-C", str(repo), "tag", "-a", "v2.13.0", "-m", "v2.13.0", release], check=True,
                   env={**os.environ, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"})
    volume = f"builder-test-ccache-{uuid.uuid4().hex[:8]}"
    data = env["root"] / "release-data"
    cfg = write_config(env["root"] / "release.toml", data,
                       f'[cache]\nccache = "volume:{volume}"\n[prebuilt]\nindex_url = "{env["index_url"]}"\n'
                       f'[repos]\ntorch = "file://{repo}"\n')
    # the built torch's own Requires-Dist, from the module's index (the fixture upstream serves
    # torch_tpu and libtpu only; the module's index got them from PyPI with the CPU torch)
    deps = [str(w) for name in ("filelock", "typing_extensions", "fsspec")
            for w in sorted((env["index"] / "files").glob(f"{name}-*.whl"))]
    assert len(deps) == 3, deps
    run_builder("index", "add", "--no-deps", *deps, config=cfg, check=True)
    try:
        done = run_builder("wheels", "--torch", "v2.13.0", "--tpu", "0.91.0", "--json", config=cfg)
    finally:
        engine.remove_volume(volume)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    wheels = {w["recipe"]: w for w in report["wheels"]}
    torch = wheels["torch"]
    assert torch["status"] == "built" and torch["version"].startswith("2.13.0+git"), torch["version"]
    assert (wheels["torch_tpu"]["status"], wheels["torch_tpu"]["filename"]) == ("prebuilt", TPU)
    [planned] = [w for w in report["plan"]["wheels"] if w["name"] == "torch_tpu"]
    # planned from the tag's declared version (version.txt), before the build gave it +git
    assert planned["why"].endswith(f"pairs with torch v2.13.0 ({torch['source_sha'][:12]}, version 2.13.0): "
                                   "glue 2_13_0"), planned["why"]
    assert report["smoke"] == "passed"
    figures = report["smoke_figures"]
    assert figures["torch"] == torch["version"] and figures["expected_glue"] == "2_13_0"
    assert figures["glue_modules"] == ["env_2_13_0.so"] and figures["wrong_glue"] == {}
    assert figures["entry_point_loads"] and figures["note"] == "no TPU: device not exercised"
    files = sorted(p.name for p in (data / "index" / "files").glob("*.whl"))
    assert torch["filename"] in files and TPU in files and LIBTPU in files
