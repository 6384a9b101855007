"""torch_tpu: pairing read from the wheel (Requires-Dist and glue files, upstream's rule),
refusals before anything is fetched, ``latest``, and the dependency closure.

The wheels are the fixture of tests/helpers_tpu.py (upstream's loader rule copied) served
from a static PEP 503 index on disk (file://), resolved with the real pip and downloaded by
builder's own code; nothing on the fetch path is faked.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from builder.config import Config, PrebuiltConfig
from builder.errors import ConfigError, PackageIndexError
from builder.index.directory import DirectoryIndex
from builder.index.prebuilt import ensure_prebuilt
from builder.recipes import built_projects
from builder.recipes.torch_tpu_pairing import (
    glue_suffix,
    pair,
    read_tpu_wheel,
    select_glue,
    version_suffix,
)
from builder.run.graph import PackageRequest, Request, resolve
from tests.helpers_tpu import VERSIONED_SO_LOADER, libtpu_wheel, serve, torch_tpu_wheel, truncate, write_index

GLUES = ("2_11_0", "2_13_0", "2_15_0")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> str:
    """0.89.0 (torch 2.9-2.11), 0.91.0 (2.11-2.15, glue 2.11/2.13/2.15), 0.92.0 (range
    2.12-2.16 but glue only from 2.14: its range admits 2.13, its glue does not)."""
    root = tmp_path_factory.mktemp("tpu-upstream")
    wheels = [torch_tpu_wheel(root / "w", "0.89.0", ">=2.9.0,<=2.11.0", ("2.9.0",)),
              torch_tpu_wheel(root / "w", "0.91.0"),
              torch_tpu_wheel(root / "w", "0.92.0", ">=2.12.0,<=2.16.0", ("2.14.0", "2.16.0")),
              libtpu_wheel(root / "w")]
    return write_index(root / "index", wheels)


def config(tmp_path: Path, url: str) -> Config:
    return Config(data_dir=str(tmp_path / "data"), prebuilt=PrebuiltConfig(index_url=url, find_links=[]))


def plan(cfg: Config, torch: str, tpu: str):
    resolved = resolve(cfg, Request((PackageRequest("torch", torch), PackageRequest("torch_tpu", tpu))))
    return {s.name: s for s in resolved.sources}


# ------------------------------------------------------------------------------ the rule
@pytest.mark.parametrize("version,suffix", [("2.13.0", "2_13_0"), ("2.13.0+cpu", "2_13_0"),
                                            ("2.14.0a0+git1a2b3c4", "2_14_0"), ("2.14.0.dev20261001", "2_14_0"),
                                            ("2.13", None), ("main", None)])
def test_version_suffix_is_upstreams(version, suffix):
    assert version_suffix(version) == suffix


@pytest.mark.parametrize("name,suffix", [("env_2_13_0.so", "2_13_0"), ("_device_ops_backend_2_15_0.so", "2_15_0"),
                                         ("libpywrap_2_13_0_common.so", None), ("libxla_base.so", None)])
def test_glue_names(name, suffix):
    assert glue_suffix(name) == suffix


@pytest.mark.parametrize("torch,glue", [("2.13.0", "2_13_0"), ("2.14.2", "2_13_0"), ("2.16.0", "2_15_0"),
                                        ("2.11.0+cpu", "2_11_0"), ("2.10.0", None)])
def test_newest_glue_not_newer_than_torch(torch, glue):
    assert select_glue(torch, GLUES) == glue


def test_builder_rule_agrees_with_the_fixture_copy_of_upstreams_loader():
    loader = types.ModuleType("fixture_loader")
    exec(VERSIONED_SO_LOADER, loader.__dict__)  # noqa: S102 - the fixture's own source
    for torch in ("2.10.0", "2.11.0", "2.12.1", "2.13.0+git1a2b3c4", "2.15.0", "2.17.0.dev20270101"):
        try:
            theirs = loader.resolve_suffix(loader.version_suffix(torch), frozenset(GLUES))
        except ImportError:
            theirs = None
        assert select_glue(torch, GLUES) == theirs, torch


def test_wheel_facts_are_read_from_the_wheel(tmp_path):
    wheel = read_tpu_wheel(torch_tpu_wheel(tmp_path, "0.91.0"))
    assert (wheel.version, wheel.torch_requirement, wheel.glues) == ("0.91.0", "<=2.15.0,>=2.11.0", GLUES)
    assert wheel.entry_point == "torch_tpu = torch_tpu._loader:load"
    assert wheel.supported() == "torch<=2.15.0,>=2.11.0 (glue for 2.11.0, 2.13.0, 2.15.0)"


def test_pairs_by_range_and_glue(tmp_path):
    wheel = read_tpu_wheel(torch_tpu_wheel(tmp_path, "0.91.0"))
    assert pair("2.13.0", wheel).glue == "2_13_0"
    local = pair("2.13.0+git1a2b3c4", wheel)
    assert local.ok and "pairs by its public version 2.13.0" in local.why
    assert pair("2.14.0", wheel).why == "glue 2_13_0 (serves torch 2.13.0 and later)"
    outside = pair("2.16.0", wheel)  # its glue would load, its Requires-Dist says no
    assert not outside.ok and "outside its Requires-Dist" in outside.why
    assert pair("2.13.0a0", wheel).ok  # a source build's pre-release is in range, as pip sees it


# ----------------------------------------------------------------------- planning time
def test_pairing_accepted_at_planning(tmp_path, upstream):
    sources = plan(config(tmp_path, upstream), "2.13.0", "0.91.0")
    assert sources["torch_tpu"].version == "0.91.0"
    assert sources["torch_tpu"].note == "pairs with torch 2.13.0: glue 2_13_0"


def test_a_torch_outside_the_range_is_refused_naming_the_newest_that_supports_it(tmp_path, upstream):
    cfg = config(tmp_path, upstream)
    with pytest.raises(ConfigError) as info:
        plan(cfg, "2.10.0", "0.91.0")
    assert info.value.exit_code == 2
    assert str(info.value) == (
        "torch_tpu 0.91.0 does not run with torch 2.10.0: torch 2.10.0 is outside its Requires-Dist "
        "torch<=2.15.0,>=2.11.0; it supports torch<=2.15.0,>=2.11.0 (glue for 2.11.0, 2.13.0, 2.15.0); "
        "torch_tpu 0.89.0 is the newest that supports torch 2.10.0 (--tpu 0.89.0); or use --torch 2.15.0")
    assert not DirectoryIndex(cfg.index_dir).entries()  # nothing published


def test_a_wheel_without_the_glue_is_refused(tmp_path, upstream):
    with pytest.raises(ConfigError) as info:
        plan(config(tmp_path, upstream), "2.13.0", "0.92.0")
    text = str(info.value)
    assert "the wheel has no glue for torch 2.13.0: its oldest is 2.14.0" in text
    assert "torch_tpu 0.91.0 is the newest that supports torch 2.13.0" in text


def test_latest_takes_the_newest_that_pairs(tmp_path, upstream):
    cfg = config(tmp_path, upstream)
    assert plan(cfg, "2.13.0", "latest")["torch_tpu"].version == "0.91.0"  # 0.92.0 lacks its glue
    assert plan(cfg, "2.16.0", "latest")["torch_tpu"].version == "0.92.0"
    assert plan(cfg, "2.10.0", "latest")["torch_tpu"].version == "0.89.0"
    with pytest.raises(ConfigError, match="--tpu latest: no torch_tpu .* runs with torch 2.8.0"):
        plan(cfg, "2.8.0", "latest")


def test_a_local_torch_version_pairs_by_its_public_version(tmp_path, upstream):
    note = plan(config(tmp_path, upstream), "2.13.0+cpu", "0.91.0")["torch_tpu"].note
    assert note == "pairs with torch 2.13.0+cpu: glue 2_13_0; 2.13.0+cpu pairs by its public version 2.13.0"


def test_a_git_ref_is_refused_naming_the_bazel_build(tmp_path, upstream):
    with pytest.raises(ConfigError) as info:
        plan(config(tmp_path, upstream), "2.13.0", "main")
    assert info.value.exit_code == 2
    assert str(info.value).startswith("torch_tpu 'main' is not a version: building torch_tpu from source is not "
                                      "supported: its wheel is built with Bazel")
    assert str(info.value).endswith("e.g. --tpu latest (--pkg torch_tpu=latest)")


def test_an_unknown_version_and_a_missing_torch_are_usage_errors(tmp_path, upstream):
    cfg = config(tmp_path, upstream)
    with pytest.raises(ConfigError, match="no torch_tpu 9.9.9 wheel for Python 3.11"):
        plan(cfg, "2.13.0", "9.9.9")
    with pytest.raises(ConfigError, match="name the torch it runs with"):
        resolve(cfg, Request((PackageRequest("torch_tpu", "0.91.0"),)))


def test_a_truncated_wheel_is_one_clear_error_and_nothing_is_published(tmp_path):
    root = tmp_path / "bad"
    broken = torch_tpu_wheel(root / "w", "0.95.0")
    metadata = truncate(broken)
    url = write_index(root / "index", [broken, libtpu_wheel(root / "w")], {broken.name: metadata})
    cfg = config(tmp_path, url)
    with pytest.raises(PackageIndexError) as info:
        plan(cfg, "2.13.0", "0.95.0")
    text = str(info.value)
    assert text.startswith(f"torch_tpu 0.95.0 from {url.removesuffix('simple/')}files/{broken.name}: ")
    assert "is not a wheel: not a valid zip file" in text and "nothing was published" in text
    assert not DirectoryIndex(cfg.index_dir).entries()


# ------------------------------------------------------------------ dependency closure
def test_fetched_alone_then_its_dependencies_but_torch(tmp_path, upstream):
    cfg = config(tmp_path, upstream)
    index = DirectoryIndex(cfg.index_dir)
    notes: list[str] = []
    entry = ensure_prebuilt(cfg, index, "torch_tpu", "0.91.0", notes.append, own_projects=built_projects(cfg))
    assert entry.filename == "torch_tpu-0.91.0-cp311-cp311-manylinux_2_31_x86_64.whl"
    assert sorted(e.filename for e in index.entries()) == [
        "libtpu-0.0.90-py3-none-any.whl", "torch_tpu-0.91.0-cp311-cp311-manylinux_2_31_x86_64.whl"]
    assert any(n.startswith("not fetching torch<=2.15.0,>=2.11.0: build or import it") for n in notes), notes


# ---------------------------------------------------------------------- the command line
@pytest.fixture(scope="module")
def served(upstream):
    """The same fixture index over HTTP ([prebuilt] index_url takes http(s) URLs)."""
    with serve(Path(upstream.removeprefix("file://")).parent) as url:
        yield url + "simple/"


def cli(tmp_path: Path, url: str, *args: str):
    from tests.conftest import run_builder

    cfg = tmp_path / "builder.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\n[prebuilt]\nindex_url = "{url}"\n')
    return run_builder("wheels", *args, "--dry-run", config=cfg, timeout=300)


def test_dry_run_shows_the_pairing_and_latest(tmp_path, served):
    done = cli(tmp_path, served, "--torch", "2.13.0", "--tpu", "latest")
    assert done.returncode == 0, done.stderr
    assert "# torch_tpu: prebuilt 0.91.0\n" in done.stdout
    assert ("plan: fetch (fetched into the local index with its dependencies; pairs with torch 2.13.0: glue 2_13_0 "
            "(latest: the newest that pairs))") in done.stdout


def test_dry_run_refuses_with_exit_2_and_one_line(tmp_path, served):
    done = cli(tmp_path, served, "--torch", "2.10.0", "--pkg", "torch_tpu=0.91.0")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: torch_tpu 0.91.0 does not run with torch 2.10.0: ")
    assert "(--tpu 0.89.0)" in lines[0]
    assert "Traceback" not in done.stderr


# -------------------------------------------------------------------------- the smoke's verdict
GOOD = {"torch": "2.13.0+cpu", "expected_glue": "2_13_0", "loader_glue": "2_13_0", "glue_modules": ["env_2_13_0.so"],
        "wrong_glue": {}, "entry_point": "torch_tpu = torch_tpu._loader:load", "entry_point_loads": True,
        "autoloaded": True, "tpus": 0, "device": ""}


def test_smoke_passes_without_a_tpu_and_says_the_device_was_not_exercised():
    from builder.recipes.torch_tpu_smoke import MARKER, parse_figures, summary, verdict

    assert parse_figures("noise\n" + MARKER + __import__("json").dumps(GOOD) + "\n") == GOOD
    assert verdict(GOOD) == []
    assert summary(GOOD) == ("torch 2.13.0+cpu: glue 2_13_0 loaded (1 native module(s)); torch.backends entry point "
                             "torch_tpu = torch_tpu._loader:load (autoloaded by import torch); "
                             "no TPU: device not exercised")


@pytest.mark.parametrize("change,problem", [
    ({"glue_modules": []}, "no torch_tpu._internal native module was loaded"),
    ({"wrong_glue": {"torch_tpu._internal.env": "env_2_11_0.so"}}, "glue for another torch loaded"),
    ({"loader_glue": "2_11_0"}, "the loader chose glue 2_11_0, builder paired 2_13_0"),
    ({"entry_point": ""}, "no torch.backends entry point of torch_tpu is registered"),
    ({"entry_point_loads": False}, "does not load a callable"),
    ({"tpus": 4, "device": "wrong result 0.0"}, "4 TPU(s), but the device check gave 'wrong result 0.0'"),
])
def test_smoke_fails_on_what_it_checks(change, problem):
    from builder.recipes.torch_tpu_smoke import verdict

    [found] = verdict({**GOOD, **change})
    assert problem in found


def test_the_upstream_table_rows_are_what_the_fixture_carries(tmp_path):
    """docs/upstream.md's wheel rows and the fixture wheel agree (one edit when upstream changes)."""
    from tests.unit.test_upstream_contract import rows

    names = {name for recipe, _, name, _ in rows() if recipe == "torch_tpu"}
    wheel = read_tpu_wheel(torch_tpu_wheel(tmp_path, "0.2.0"))
    assert "Requires-Dist: torch>=2.11.0,<=2.15.0" in names and wheel.torch_requirement == "<=2.15.0,>=2.11.0"
    assert f"[torch.backends] {wheel.entry_point}" in names


# ------------------------------------------------------------------------------ the nightly
NIGHT = __import__("datetime").date(2026, 12, 5)
FOR_MAIN = ">=2.98.0,<=2.99.0"  # faketorch main is 2.99.0a0: its nightly is 2.99.0.dev20261205


@pytest.fixture
def nightly_env(tmp_path):
    from builder.examples import write_example_repo

    repo = write_example_repo("faketorch", tmp_path / "repos" / "faketorch")
    root = tmp_path / "up"
    wheels = [torch_tpu_wheel(root / "w", "0.93.0", FOR_MAIN, ("2.98.0", "2.99.0")),
              torch_tpu_wheel(root / "w", "0.92.0", ">=2.12.0,<=2.16.0", ("2.14.0", "2.16.0")),
              libtpu_wheel(root / "w")]
    cfg = config(tmp_path, write_index(root / "index", wheels))
    repos = {"torch": f"file://{repo}", "torch_tpu": "https://github.com/google-pytorch/torch_tpu.git"}
    return cfg, repos, root, wheels


def test_a_nightly_takes_the_newest_torch_tpu_that_pairs_with_its_torch(nightly_env):
    from builder.cli.nightly import nightly_request, offer_lines
    from builder.report.nightly import NightlyState, plan_nightly

    cfg, repos, _, _ = nightly_env
    plan = plan_nightly(cfg, NightlyState(), NIGHT, ["torch", "torch_tpu"], repos)
    assert plan.versions == {"torch": "2.99.0.dev20261205"} and list(plan.shas) == ["torch"]
    assert plan.picked == {"torch_tpu": "0.93.0"} and not plan.nothing_new
    assert plan.offers_json() == {"torch_tpu": {
        "picked": "0.93.0", "why": "pairs with torch 2.99.0.dev20261205: glue 2_99_0", "new": ["0.93.0", "0.92.0"],
        "offered": [{"version": "0.93.0", "supports": "torch<=2.99.0,>=2.98.0"},
                    {"version": "0.92.0", "supports": "torch<=2.16.0,>=2.12.0"}]}}
    assert offer_lines(plan) == ["torch_tpu: 0.93.0: pairs with torch 2.99.0.dev20261205: glue 2_99_0; new on offer "
                                 "since the last nightly: 0.93.0 (torch<=2.99.0,>=2.98.0), 0.92.0 "
                                 "(torch<=2.16.0,>=2.12.0)"]
    request = nightly_request(cfg, ["torch", "torch_tpu"], plan.shas, repos, plan.versions, 0, plan.picked)
    assert [(p.name, p.spec, p.version) for p in request.packages] == [
        ("torch", plan.shas["torch"], "2.99.0.dev20261205"), ("torch_tpu", "0.93.0", "")]


def test_a_nightly_sees_a_new_torch_tpu_as_something_new(nightly_env):
    from builder.report.nightly import NightlyState, plan_nightly

    cfg, repos, root, wheels = nightly_env
    state = NightlyState()
    first = plan_nightly(cfg, state, NIGHT, ["torch", "torch_tpu"], repos)
    state.last, state.seen = first.heads, {}
    state.saw(first)
    again = plan_nightly(cfg, state, NIGHT, ["torch", "torch_tpu"], repos)
    assert again.nothing_new and again.new == {"torch_tpu": []}
    write_index(root / "index", [*wheels, torch_tpu_wheel(root / "w", "0.94.0", ">=2.98.0,<=2.100.0", ("2.98.0",))])
    newer = plan_nightly(cfg, state, NIGHT, ["torch", "torch_tpu"], repos)
    assert newer.picked == {"torch_tpu": "0.94.0"} and newer.new == {"torch_tpu": ["0.94.0"]}
    assert newer.offers["torch_tpu"].why == ("pairs with torch 2.99.0.dev20261205: glue 2_98_0 (serves torch 2.98.0 "
                                             "and later)")
    assert not newer.nothing_new  # torch did not move, torch_tpu did: the set is built again


def test_a_nightly_builds_the_rest_when_no_torch_tpu_pairs(nightly_env, tmp_path):
    from builder.cli.nightly import nightly_request
    from builder.report.nightly import NightlyState, plan_nightly

    _, repos, root, wheels = nightly_env
    cfg = config(tmp_path / "only-old", write_index(tmp_path / "old", [wheels[1], wheels[2]]))
    plan = plan_nightly(cfg, NightlyState(), NIGHT, ["torch", "torch_tpu"], repos)
    assert plan.picked == {"torch_tpu": ""}
    assert plan.offers["torch_tpu"].why == ("none on offer pairs with torch 2.99.0.dev20261205; the newest, 0.92.0, "
                                            "supports torch<=2.16.0,>=2.12.0")
    request = nightly_request(cfg, ["torch", "torch_tpu"], plan.shas, repos, plan.versions, 0, plan.picked)
    assert [p.name for p in request.packages] == ["torch"]


# ------------------------------------------------------------------------------ the lock
def test_the_lock_records_torch_tpu_and_libtpu_with_their_hashes(tmp_path, upstream):
    import hashlib

    from builder.repro.lockfile import BaseLock, Lock, LockError, lock_from_json, lock_to_json
    from builder.repro.prebuilt_lock import check_prebuilt, check_prebuilt_version, lock_prebuilt

    cfg = config(tmp_path, upstream)
    files = Path(upstream.removeprefix("file://")).parent / "files"
    tpu, libtpu = "torch_tpu-0.91.0-cp311-cp311-manylinux_2_31_x86_64.whl", "libtpu-0.0.90-py3-none-any.whl"
    want = {name: hashlib.sha256((files / name).read_bytes()).hexdigest() for name in (tpu, libtpu)}
    upstream_lock = lock_prebuilt(cfg, "torch_tpu", "0.91.0", built_projects(cfg))  # [prebuilt], torch not followed
    assert (upstream_lock.version, upstream_lock.files) == ("0.91.0", want)
    index = DirectoryIndex(cfg.index_dir)
    ensure_prebuilt(cfg, index, "torch_tpu", "0.91.0", lambda _: None, own_projects=built_projects(cfg))
    assert lock_prebuilt(cfg, "torch_tpu", "0.91.0", built_projects(cfg)) == upstream_lock  # from the index: same
    lock = Lock(base=BaseLock("b", "sha256:" + "9" * 64, [], {}), stages={}, prebuilt={"torch_tpu": upstream_lock})
    assert lock_from_json(lock_to_json(lock)) == lock
    with pytest.raises(LockError, match="libtpu-0.0.90-py3-none-any.whl sha256 'x' is not 64 hex digits"):
        lock_from_json(lock_to_json(lock).replace(want[libtpu], "x"))
    check_prebuilt_version(lock, "torch_tpu", "0.91.0", "--tpu")
    with pytest.raises(LockError, match="torch_tpu 0.92.0 is not the locked 0.91.0"):
        check_prebuilt_version(lock, "torch_tpu", "0.92.0", "--tpu")
    check_prebuilt(lock, "torch_tpu", index)
    changed = type(upstream_lock)("0.91.0", {**want, tpu: "0" * 64})
    bad = Lock(base=lock.base, stages={}, prebuilt={"torch_tpu": changed})
    with pytest.raises(LockError, match=f"torch_tpu: {tpu} has sha256 "):
        check_prebuilt(bad, "torch_tpu", index)
