"""The package graph: --pkg parsing, build order by what each recipe builds against,
who decides an unnamed dependency, and conflicting decisions."""

from __future__ import annotations

import pytest

from builder.config import Config
from builder.errors import ConfigError
from builder.recipes import RECIPES
from builder.recipes.base import PackageSource, Recipe
from builder.run.graph import PackageRequest, Request, build_order, merge, parse_pkg, resolve
from builder.source.refs import ResolvedRef


class Leaf(Recipe):
    name, project = "leaf", "leaf"


class Ext(Recipe):
    name, project, builds_against = "ext", "ext", ("leaf",)


class Pinning(Recipe):
    """Decides its leaf itself, as xla's .torch_commit does."""

    name, project, builds_against = "pinning", "pinning", ("leaf",)

    def plan_against(self, me, plan):
        return {"leaf": PackageSource("leaf", ref=ResolvedRef("file:///leaf", "pinned", "p" * 40))}


@pytest.fixture
def recipes(monkeypatch):
    for recipe in (Leaf(), Ext(), Pinning()):
        monkeypatch.setitem(RECIPES, recipe.name, recipe)
    refs = {"main": "a" * 40, "dev": "b" * 40}
    monkeypatch.setattr("builder.recipes.base.resolve_ref",
                        lambda url, ref: ResolvedRef(url, ref, refs.get(ref) or pytest.fail(f"no ref {ref}")))
    monkeypatch.setattr(Recipe, "repo_url", lambda self, cfg: f"file:///{self.name}")


def test_pkg_option_parsing():
    assert parse_pkg("torchvision=main") == PackageRequest("torchvision", "main")
    assert parse_pkg("spline=1.2.2") == PackageRequest("spline", "1.2.2")
    assert parse_pkg("Ext") == PackageRequest("ext", None)
    for bad in ("=main", "a b=main", "x=", "../x=main"):
        with pytest.raises(ConfigError):
            parse_pkg(bad)


def test_merge_keeps_one_entry_and_refuses_two_specs():
    merged = merge([PackageRequest("ext", None), PackageRequest("ext", "main", repo="file:///r")])
    assert merged == (PackageRequest("ext", "main", "file:///r"),)
    with pytest.raises(ConfigError, match="requested twice"):
        merge([PackageRequest("ext", "main"), PackageRequest("ext", "dev")])


def test_order_puts_what_a_package_builds_against_first(recipes):
    assert build_order(Config(), ["ext"]) == ["leaf", "ext"]
    assert build_order(Config(), ["ext", "leaf", "pinning"]) == ["leaf", "ext", "pinning"]
    with pytest.raises(ConfigError, match="no recipe named 'nope'"):
        build_order(Config(), ["nope"])


def test_cycle_is_one_error(recipes, monkeypatch):
    monkeypatch.setattr(Leaf, "builds_against", ("ext",))
    with pytest.raises(ConfigError, match="build against each other: leaf -> ext -> leaf"):
        build_order(Config(), ["leaf"])


def test_unnamed_dependency_is_an_error_naming_the_fix(recipes):
    with pytest.raises(ConfigError, match="ext builds against leaf, which nothing names") as caught:
        resolve(Config(), Request((PackageRequest("ext", "main"),)))
    assert "--pkg leaf=REF" in caught.value.hint


def test_named_dependency_is_resolved_and_ordered(recipes):
    resolved = resolve(Config(), Request((PackageRequest("ext", "main"), PackageRequest("leaf", "dev"))))
    assert [(s.name, s.ref.sha) for s in resolved.sources] == [("leaf", "b" * 40), ("ext", "a" * 40)]
    assert resolved.named == {"ext", "leaf"}


def test_a_prebuilt_version_is_not_resolved(recipes):
    resolved = resolve(Config(), Request((PackageRequest("ext", "main"), PackageRequest("leaf", "2.13.0"))))
    assert resolved.source("leaf") == PackageSource("leaf", version="2.13.0")


def test_a_pinning_recipe_decides_its_dependency(recipes):
    resolved = resolve(Config(), Request((PackageRequest("pinning", "main"),)))
    assert resolved.source("leaf").ref.ref == "pinned"


def test_two_decisions_for_one_dependency_conflict(recipes):
    request = Request((PackageRequest("pinning", "main"), PackageRequest("ext", "main"),
                       PackageRequest("leaf", "dev")))
    with pytest.raises(ConfigError, match="builds against leaf"):
        resolve(Config(), request)


def test_nothing_requested():
    with pytest.raises(ConfigError, match="nothing to build"):
        resolve(Config(), Request())
    with pytest.raises(ConfigError, match="nothing to build"):  # a repo alone names nothing to build
        resolve(Config(), Request((PackageRequest("leaf", None, repo="file:///elsewhere"),)))


def test_settings_of_an_unnamed_package_apply_when_the_graph_pulls_it_in(recipes):
    request = Request((PackageRequest("ext", "main"), PackageRequest("leaf", "dev", version="9.9"),
                       PackageRequest("pinning", None, repo="file:///other")))
    resolved = resolve(Config(), request)
    assert [s.name for s in resolved.sources] == ["leaf", "ext"]  # pinning: settings only
    assert resolved.inputs.versions == {"leaf": "9.9"} and resolved.inputs.repo_url("pinning") == "file:///other"


def test_every_ref_is_checked_for_syntax_before_any_network_call(tmp_path):
    """Offline, with xla's repository unreachable: the malformed torch ref is the error
    (exit 2), not 'cannot reach repository' (exit 1) from resolving xla first."""
    from builder.errors import ValidationError

    cfg = Config(data_dir=str(tmp_path))
    request = Request(packages=(PackageRequest("torch", "a b"),
                                PackageRequest("xla", "main", repo=f"file://{tmp_path}/no-such-xla.git")))
    with pytest.raises(ValidationError) as info:
        resolve(cfg, request)
    assert info.value.message == "--torch 'a b' is not a valid git ref (letters, digits, . _ / + -)"
    assert info.value.exit_code == 2
    bad_repo = Request(packages=(PackageRequest("torch", "main", repo="--upload-pack=touch /tmp/x"),))
    with pytest.raises(ValidationError, match="^--torch-repo"):
        resolve(cfg, bad_repo)
    assert not (tmp_path / "mirrors").exists()  # nothing fetched


def test_a_nightly_builds_heads_but_what_a_package_pins_at_its_pin():
    """builder nightly --pkg xla: torch is in the set (xla builds against it), but xla's
    .torch_commit decides it: no head, no dated version for torch; xla at its head."""
    from builder.cli.nightly import nightly_request
    from builder.recipes import get_recipe

    cfg = Config()
    assert get_recipe("xla", cfg).pins_against and not get_recipe("xla", cfg).nightly
    request = nightly_request(cfg, ["torch", "xla"], {"torch": "t" * 40, "xla": "x" * 40},
                              {"torch": "file:///t", "xla": "file:///x"},
                              {"torch": "2.99.0.dev20261204", "xla": "2.99.0.dev20261204"}, jobs=2)
    assert request.packages == (PackageRequest("torch", None, "file:///t", ""),
                                PackageRequest("xla", "x" * 40, "file:///x", "2.99.0.dev20261204"))
    assert request.unpinned is False and request.jobs == 2
    alone = nightly_request(cfg, ["torch"], {"torch": "t" * 40}, {"torch": "file:///t"},
                            {"torch": "2.99.0.dev20261204"}, jobs=0)
    assert alone.packages == (PackageRequest("torch", "t" * 40, "file:///t", "2.99.0.dev20261204"),)
