"""Stage images against the real Docker daemon: bootstrap, build, reuse, pins."""

from __future__ import annotations

import contextlib
import json
import time

import pytest

from builder.namelock import lock_name
from tests.conftest import HOST_CA, run_builder, write_config

pytestmark = pytest.mark.docker


def images(cfg, *extra):
    done = run_builder("images", "--json", *extra, config=cfg, check=True)
    return {r["name"]: r for r in json.loads(done.stdout)}


@pytest.fixture(scope="module")
def cfg(tmp_path_factory, base_image):
    data = tmp_path_factory.mktemp("images")
    return write_config(data / "builder.toml", data)


@pytest.fixture(scope="module")
def first_run(cfg):
    return images(cfg)


def test_bootstrap_is_skipped_when_tag_exists(cfg, engine, base_image):
    before = engine.image_id(base_image)
    done = run_builder("base", "bootstrap", config=cfg, check=True)
    assert "skipped" in done.stdout
    assert engine.image_id(base_image) == before


def test_stages_build_and_carry_labels(first_run, engine):
    assert list(first_run) == ["base", "toolchain", "python"]
    for name, result in first_run.items():
        assert result["tag"] == f"builder/{name}:{result['key']}"
        labels = engine.image_labels(result["tag"])
        assert labels["builder.key"] == result["key"]
        assert labels["builder.stage"] == name
    # Each stage's parent is the previous stage's image.
    assert engine.image_labels(first_run["python"]["tag"])["builder.parent-id"] == first_run["toolchain"]["image_id"]


def test_second_run_reuses_every_stage(cfg, first_run, engine):
    second = images(cfg)
    assert all(r["reused"] for r in second.values()), second
    assert {n: r["image_id"] for n, r in second.items()} == {n: r["image_id"] for n, r in first_run.items()}


def test_compilers_match_pins(first_run, engine):
    from builder.engine import ContainerSpec
    from builder.stages.images import installed_versions

    tag = first_run["toolchain"]["tag"]
    result = engine.run(ContainerSpec(image=tag, network="none",
                                      command=["sh", "-c", "gcc --version; clang --version; g++ --version"]))
    assert "gcc (Debian 12.2.0-14+deb12u1) 12.2.0" in result.output
    assert "Debian clang version 14.0.6" in result.output
    versions = installed_versions(engine, tag, ["gcc-12", "clang-14", "ccache", "cmake", "ninja-build"])
    assert versions == {"gcc-12": "12.2.0-14+deb12u1", "clang-14": "1:14.0.6-12",
                        "ccache": "4.8+really4.7.5-1", "cmake": "3.25.1-1", "ninja-build": "1.11.1-2~deb12u1"}


def test_compiler_banners_are_read_once_per_image_id(first_run, engine, tmp_path):
    """The first call reads the banners in a container and records them under the image ID;
    the next reads the record (a planted banner comes back: no container ran), another
    command list or a corrupt record reads the image again."""
    from builder.stages.images import remembered_banners

    tag, image_id = first_run["toolchain"]["tag"], first_run["toolchain"]["image_id"]
    record = tmp_path / f"{image_id.removeprefix('sha256:')}.json"
    first = remembered_banners(engine, tag, image_id, ["gcc", "clang"], tmp_path)
    assert first == {"gcc": "gcc (Debian 12.2.0-14+deb12u1) 12.2.0", "clang": "Debian clang version 14.0.6"}
    assert json.loads(record.read_text())["banners"] == first
    record.write_text(json.dumps({"commands": ["clang", "gcc"], "banners": {"gcc": "planted"}}))
    assert remembered_banners(engine, tag, image_id, ["gcc", "clang"], tmp_path) == {"gcc": "planted"}
    assert remembered_banners(engine, tag, image_id, ["gcc"], tmp_path) == {"gcc": first["gcc"]}
    record.write_text("{not json")
    assert remembered_banners(engine, tag, image_id, ["clang", "gcc"], tmp_path) == first
    assert json.loads(record.read_text())["banners"] == first


def test_extra_ca_is_trusted_in_images(first_run, engine):
    """The host's CA bundle reached the image (pip reached PyPI through it to build python)."""
    from builder.engine import ContainerSpec

    result = engine.run(ContainerSpec(
        image=first_run["python"]["tag"], network="none",
        command=["cat", "/usr/local/share/ca-certificates/builder-extra.crt"]))
    with open(HOST_CA) as fh:
        assert result.output == fh.read()


def test_changing_one_pin_rebuilds_that_stage_and_after_only(tmp_path, first_run, engine):
    changed = write_config(tmp_path / "builder.toml", tmp_path,
                           '[python]\nrequirements = ["setuptools==80.9.0", "wheel==0.45.1", "packaging==24.2"]\n')
    # An earlier run on this machine may have built this very stage: start without it.
    plan = run_builder("images", "--dry-run", config=changed, check=True).stdout
    python_tag = next(line.split()[4] for line in plan.splitlines() if line.startswith("# ---- stage python:"))
    engine.remove_image(python_tag)
    result = images(changed)
    assert result["base"]["reused"] and result["toolchain"]["reused"]
    assert result["base"]["image_id"] == first_run["base"]["image_id"]
    assert result["toolchain"]["image_id"] == first_run["toolchain"]["image_id"]
    assert not result["python"]["reused"]
    assert result["python"]["key"] != first_run["python"]["key"]
    from builder.engine import ContainerSpec

    freeze = engine.run(ContainerSpec(image=result["python"]["tag"], network="none",
                                      command=["cat", "/opt/venv/builder-freeze.txt"])).output
    assert "packaging==24.2" in freeze


def test_unavailable_pin_is_a_clear_error(tmp_path, first_run, engine):
    bad = write_config(tmp_path / "builder.toml", tmp_path, "")
    text = bad.read_text().replace('[base]\n', '[base]\nca_certificates = "1999.0-1"\n')
    bad.write_text(text)
    done = run_builder("images", "--stage", "base", config=bad)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: stage image builder/base:") and "see the log" in last
    assert "1999.0-1" in (tmp_path / "logs" / "images").joinpath(
        next(p.name for p in (tmp_path / "logs" / "images").iterdir())).read_text()
    key = last.split("builder/base:")[1].split()[0]
    assert engine.image_id(f"builder/base:{key}") is None


def test_dry_run_builds_nothing(tmp_path, first_run):
    cfg = write_config(tmp_path / "builder.toml", tmp_path, '[python]\nrequirements = ["wheel==0.44.0"]\n')
    done = run_builder("images", "--dry-run", config=cfg, check=True)
    assert "would build" in done.stdout and "wheel==0.44.0" in done.stdout
    assert f"{first_run['toolchain']['tag']} (exists, reuse)" in done.stdout


def test_render_writes_dockerfiles(tmp_path, cfg, first_run):
    done = run_builder("render", "--out", str(tmp_path / "out"), config=cfg, check=True)
    assert (tmp_path / "out" / "toolchain.Dockerfile").read_text().startswith("# builder stage: toolchain")
    assert first_run["python"]["tag"] in done.stdout


def _stamp_dockerfile(parent: str) -> str:
    # a different image every build (the time is in the file): two builds of one tag disagree
    return f"FROM {parent}\nRUN sleep 3 && date +%s%N > /stamp\n"


def test_two_runs_building_one_stage_at_once_agree_on_its_image(first_run, engine, tmp_path):
    """Two runs that find a stage missing both build it; the first to finish names it and the
    other yields to that image (Engine.claim_tag), so both chain the stages above on one ID.
    Seen on a fresh machine: two runs built the toolchain at once, its tag moved to the second
    image, and the python stage, the deps and the smoke image got other keys in later runs."""
    import threading
    import uuid

    from builder.engine import Engine

    tag = f"builder-test-claim/{uuid.uuid4().hex[:8]}:stage"
    label = {"builder-test.claim": tag}
    results: dict[int, str] = {}

    def build(n: int) -> None:
        results[n] = Engine().build(_stamp_dockerfile(first_run["base"]["tag"]), {}, tag, label, {},
                                    tmp_path / f"build{n}.log", network="none").image_id

    threads = [threading.Thread(target=build, args=(n,)) for n in (1, 2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert not any(t.is_alive() for t in threads), "a build did not finish in 300 s"
        assert len(results) == 2, results
        assert results[1] == results[2] == engine.image_id(tag)
        # both really built (the builds overlapped), and the losing image is gone
        assert all("Successfully built" in (tmp_path / f"build{n}.log").read_text() for n in (1, 2))
        assert [i.id for i in engine.client.images.list(filters={"label": f"builder-test.claim={tag}"})] \
            == [results[1]]
    finally:
        engine.remove_image(tag)


def test_a_stage_built_when_its_tag_exists_yields_unless_forced(first_run, engine, tmp_path):
    """claim_tag keeps the image a tag already names (the other run's); a forced rebuild
    (``replace``, `builder images --force STAGE`) moves the tag to the new image."""
    import uuid

    tag = f"builder-test-claim/{uuid.uuid4().hex[:8]}:stage"
    label = {"builder-test.claim": tag}
    held = first_run["toolchain"]["image_id"]
    engine.tag(held, tag)
    try:
        built = engine.build(_stamp_dockerfile(first_run["base"]["tag"]), {}, tag, label, {},
                             tmp_path / "yield.log", network="none")
        assert built.image_id == held and engine.image_id(tag) == held
        assert engine.client.images.list(filters={"label": f"builder-test.claim={tag}"}) == []  # ours removed
        forced = engine.build(_stamp_dockerfile(first_run["base"]["tag"]), {}, tag, label, {},
                              tmp_path / "force.log", network="none", replace=True)
        assert forced.image_id != held and engine.image_id(tag) == forced.image_id
        assert engine.image_id(first_run["toolchain"]["tag"]) == held  # the toolchain keeps its own name
    finally:
        engine.api.remove_image(tag)  # the name only (the forced image goes with it, the toolchain stays)


def _two_images(engine, base: str, tmp_path, prefix: str) -> tuple[str, str]:
    """Two small images of distinct IDs under throwaway names ``prefix``-a/-b."""
    return tuple(engine.build(f"FROM {base}\nLABEL builder-test.which={n}\n", {}, f"{prefix}-{n}:x",
                              {"builder-test.claim": prefix}, {}, tmp_path / f"{n}.log",
                              network="none").image_id for n in ("a", "b"))


def _remove_claim_images(engine, prefix: str) -> None:
    for image in engine.client.images.list(filters={"label": f"builder-test.claim={prefix}"}):
        engine.api.remove_image(image.id, force=True)


def test_a_claim_waits_for_the_name_lock_then_yields_to_the_holder(first_run, engine, tmp_path):
    """The look and the tag of claim_tag are one step under the daemon-wide name lock: a
    claim made while another run holds the lock waits, then finds the holder's image and
    yields. Without the lock both tag (docker tag moves a name) and each keeps its own ID,
    as a CI run of the concurrent test above saw once."""
    import threading
    import uuid

    prefix = f"builder-test-lock/{uuid.uuid4().hex[:8]}"
    tag = f"{prefix}:stage"
    first, second = _two_images(engine, first_run["base"]["tag"], tmp_path, prefix)
    result: dict[str, str] = {}
    try:
        with engine.name_lock(tag, first):
            thread = threading.Thread(target=lambda: result.setdefault("id", engine.claim_tag(second, tag)))
            thread.start()
            thread.join(timeout=1.0)
            assert thread.is_alive() and engine.image_id(tag) is None  # it waits for the lock
            engine.tag(first, tag)
        thread.join(timeout=30)
        assert not thread.is_alive(), "the claim did not end 30 s after the lock was released"
        assert result["id"] == first == engine.image_id(tag)
        assert engine.image_id(second) is None  # the loser's image is removed
        lock = lock_name(tag)
        assert engine.client.containers.list(all=True, filters={"name": lock}) == []  # released
    finally:
        _remove_claim_images(engine, prefix)


def test_a_lock_left_by_a_dead_run_is_taken_over_once_stale_and_a_live_one_is_a_clear_error(
        first_run, engine, tmp_path):
    import uuid

    from builder.errors import BuildError

    prefix = f"builder-test-lock/{uuid.uuid4().hex[:8]}"
    tag = f"{prefix}:stage"
    first, _ = _two_images(engine, first_run["base"]["tag"], tmp_path, prefix)
    lock = lock_name(tag)
    try:
        engine.api.create_container(first, command=["true"], name=lock)  # a lock nobody releases
        with pytest.raises(BuildError) as raised:
            with engine.name_lock(tag, first, wait=0.5):
                pass
        assert raised.value.message == f"the name {tag} stayed locked for 0.5 s (container {lock})"
        assert raised.value.hint == f"if no other builder run is naming it, `docker rm {lock}`"
        time.sleep(1.1)
        with engine.name_lock(tag, first, wait=5, stale=1.0):  # older than stale: taken over
            assert engine.api.inspect_container(lock)["Config"]["Labels"]["builder.name-lock"] == tag
        assert engine.client.containers.list(all=True, filters={"name": lock}) == []
    finally:
        with contextlib.suppress(Exception):
            engine.api.remove_container(lock, force=True)
        _remove_claim_images(engine, prefix)
