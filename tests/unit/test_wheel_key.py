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
