"""The wheel key covers everything that can change a wheel's bytes (issue "Hardening", item 5)."""

from __future__ import annotations

from builder.recipes import BuildContext, get_recipe
from builder.recipes.torch import TorchRecipe
from builder.repro import normalize
from builder.run import wheelstep
from builder.run.wheelstep import container_env, wheel_key

CTX = BuildContext(jobs=2, source_date_epoch=1)


def key(recipe=None, ctx=CTX, **kw):
    recipe = recipe or get_recipe("torch")
    return wheel_key(recipe, "sha256:img", "a" * 40, container_env(recipe, ctx), "", ctx, **kw)


class ExtraPrepare(TorchRecipe):
    def prepare_lines(self, ctx):
        return [*super().prepare_lines(ctx), "echo patched > /tmp/x"]


def test_a_changed_prepare_line_changes_the_key():
    assert key(ExtraPrepare()) != key()


def test_speed_only_values_do_not_change_the_key():
    from dataclasses import replace

    assert key(ctx=replace(CTX, jobs=7)) == key()
    xla = get_recipe("xla")
    with_remote = replace(CTX, bazel_remote="http://127.0.0.1:9/cache", against=("torch==1.0",))
    without = replace(CTX, against=("torch==1.0",))
    assert key(xla, with_remote) == key(xla, without)


def test_requirements_checkout_and_normalizer_are_keyed(monkeypatch):
    base = key()
    assert key(requirements=("numpy",)) != base
    assert key(checkout_source="b" * 40) != base
    monkeypatch.setattr(wheelstep, "NORMALIZER_VERSION", normalize.NORMALIZER_VERSION + "x")
    assert key() != base


def test_remote_execution_lines_on_paper():
    import pytest

    xla = get_recipe("xla")
    text = xla.remote_execution_bazelrc("grpcs://reapi.example:443", "default", jobs=200)
    assert text.splitlines() == ["build --remote_executor=grpcs://reapi.example:443",
                                 "build --remote_upload_local_results", "build --remote_download_toplevel",
                                 "build --spawn_strategy=remote,local", "build --remote_timeout=3600",
                                 "build --remote_instance_name=default", "build --jobs=200"]
    with pytest.raises(ValueError, match="grpc"):
        xla.remote_execution_bazelrc("http://cache:8080")


class FixedRecipe:
    """A recipe whose script shows the context values the key sees, so the key's own
    computation can be pinned without pinning any real recipe's script."""

    name = "fixed"

    def unkeyed_env(self):
        return {"MAX_JOBS", "HOME"}

    def script(self, ctx):
        return f"build jobs={ctx.jobs} epoch={ctx.source_date_epoch} remote={ctx.bazel_remote!r} v={ctx.version}"


def fixed_key(**kw):
    args = {"recipe": FixedRecipe(), "image_id": "sha256:img", "source_sha": "a" * 40,
            "env": {"USE_CUDA": "0", "MAX_JOBS": "2", "CCACHE_BASEDIR": "/src"}, "against_sha256": "",
            "ctx": BuildContext(jobs=2, source_date_epoch=1), "requirements": (), "checkout_source": ""}
    return wheel_key(**{**args, **kw})


def test_the_wheel_key_is_pinned():
    """Its value is pinned (a changed computation makes every user's wheels rebuild) and
    does not depend on the order of the env: jobs and the remote cache are set aside."""
    assert fixed_key() == "7ce705b6bc0b625a7468a6e1a5e4c7ef"
    assert fixed_key(env={"CCACHE_BASEDIR": "/src", "MAX_JOBS": "2", "USE_CUDA": "0"}) == fixed_key()
    assert fixed_key(ctx=BuildContext(jobs=9, source_date_epoch=1, bazel_remote="http://127.0.0.1:9/c")) \
        == fixed_key()
    # against, requirements and checkout default to none
    ctx = BuildContext(jobs=2, source_date_epoch=1)
    plain = wheel_key(FixedRecipe(), "sha256:img", "a" * 40, {"USE_CUDA": "0"}, ctx=ctx)
    assert plain == fixed_key(env={"USE_CUDA": "0"})
    assert fixed_key(ctx=None) == "b5b5df6f0394455f90d98a5d1a4abd55"  # the default context: jobs 0, epoch 0


def test_every_input_of_the_wheel_key_changes_it():
    base = fixed_key()
    others = {
        "recipe": fixed_key(recipe=type("Other", (FixedRecipe,), {"name": "other"})()),
        "image": fixed_key(image_id="sha256:other"),
        "source": fixed_key(source_sha="b" * 40),
        "env": fixed_key(env={"USE_CUDA": "1", "MAX_JOBS": "2", "CCACHE_BASEDIR": "/src"}),
        # built against another torch wheel (its sha256): never the old key
        "against": fixed_key(against_sha256="c" * 64),
        "checkout": fixed_key(checkout_source="d" * 40),
        "epoch": fixed_key(ctx=BuildContext(jobs=2, source_date_epoch=2)),
        "version": fixed_key(ctx=BuildContext(jobs=2, source_date_epoch=1, version="9.9")),
        "requirements": fixed_key(requirements=("numpy",)),
    }
    assert base not in others.values() and len(set(others.values())) == len(others)


def test_speed_only_env_is_not_keyed():
    """Job counts, HOME and ccache's own settings change speed, not bytes."""
    base = fixed_key()
    assert fixed_key(env={"USE_CUDA": "0", "MAX_JOBS": "7", "CCACHE_BASEDIR": "/other", "CCACHE_DIR": "/c"}) == base
    assert wheelstep.keyed_env(FixedRecipe(), {"USE_CUDA": "0", "MAX_JOBS": "2", "CCACHE_SLOPPINESS": "x",
                                               "ccache_lower": "1"}) == {"USE_CUDA": "0", "ccache_lower": "1"}


def test_the_build_container_gets_the_shared_cache_dir_and_its_stats_log():
    env = container_env(get_recipe("torch"), CTX)
    assert env["CCACHE_DIR"] == "/ccache" and env["CCACHE_STATSLOG"] == "/out/ccache-stats.log"
    assert env["HOME"] == "/tmp/builder-home" and env["PYTHONDONTWRITEBYTECODE"] == "1"
