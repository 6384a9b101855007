import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest

from builder.config import load_config
from builder.errors import BuildError, ConfigError
from builder.stages.plan import image_stages, render_stage, select_stages, stage_key, upstream_version
from builder.stages.render import _environment, render_template
from tests.conftest import REPO


def keys(cfg, base_id="sha256:base"):
    """Keys of the three stages, chaining a fake parent ID derived from the parent key."""
    out = {}
    parent_ref, parent_id = cfg.base.image, base_id
    for spec in image_stages(cfg):
        stage = render_stage(spec, parent_ref, parent_id)
        out[spec.name] = stage.key
        parent_ref, parent_id = stage.tag, "sha256:" + stage.key
    return out


def test_keys_are_stable():
    """A key is a pure function of the inputs: the same in another process (another hash
    seed), from separately loaded configs, whatever the order of buildargs and files; and
    its value is pinned, since changing how keys are computed rebuilds every user's images."""
    script = ("import json; from builder.config import load_config; from tests.unit.test_plan import keys; "
              "print(json.dumps(keys(load_config(None, {}))))")
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}, cwd=REPO)
    here = keys(load_config(None, {}))
    assert json.loads(other.stdout) == here
    assert len(set(here.values())) == 3 and all(re.fullmatch(r"[0-9a-f]{24}", k) for k in here.values())
    assert stage_key("toolchain", "FROM x\n", "sha256:1", {"B": "2", "A": "1"}, {"b.crt": b"b", "a.crt": b"a"}) \
        == stage_key("toolchain", "FROM x\n", "sha256:1", {"A": "1", "B": "2"}, {"a.crt": b"a", "b.crt": b"b"}) \
        == "d66d69559aeb6b771852d3bf"
    assert stage_key("python", "FROM x\n", "sha256:1", {"A": "1", "B": "2"}, {"a.crt": b"a", "b.crt": b"b"}) \
        != "d66d69559aeb6b771852d3bf"  # the stage's name is part of it


def test_changing_a_toolchain_pin_changes_toolchain_and_after_only():
    cfg = load_config(None, {})
    changed = load_config(None, {"BUILDER_TOOLCHAIN_CMAKE": "3.25.1-2"})
    before, after = keys(cfg), keys(changed)
    assert before["base"] == after["base"]
    assert before["toolchain"] != after["toolchain"]
    assert before["python"] != after["python"]


def test_changing_a_python_requirement_changes_python_only():
    cfg = load_config(None, {})
    changed = load_config(None, {"BUILDER_PYTHON_REQUIREMENTS": "setuptools==70.0.0"})
    before, after = keys(cfg), keys(changed)
    assert before["base"] == after["base"] and before["toolchain"] == after["toolchain"]
    assert before["python"] != after["python"]


def test_parent_id_changes_every_key():
    cfg = load_config(None, {})
    before, after = keys(cfg, "sha256:one"), keys(cfg, "sha256:two")
    assert all(before[s] != after[s] for s in before)


def test_template_text_changes_key(tmp_path):
    cfg = load_config(None, {})
    spec = image_stages(cfg)[2]
    (tmp_path / spec.template).write_text("FROM {{ parent }}\n")
    one = render_stage(spec, "p", "sha256:p", tmp_path)
    (tmp_path / spec.template).write_text("FROM {{ parent }}\nRUN true\n")
    two = render_stage(spec, "p", "sha256:p", tmp_path)
    assert one.key != two.key


def test_key_covers_files_and_buildargs():
    base = stage_key("s", "FROM x", "sha256:1", {}, {})
    assert stage_key("s", "FROM x", "sha256:1", {}, {"ca.crt": b"a"}) != base
    assert stage_key("s", "FROM x", "sha256:1", {"A": "1"}, {}) != base
    assert stage_key("s", "FROM x", "sha256:1", {}, {"ca.crt": b"a"}) != stage_key(
        "s", "FROM x", "sha256:1", {}, {"ca.crt": b"b"})
    assert stage_key("s", "FROM x", "sha256:1", {}, {}) == base


def test_extra_ca_is_a_copied_file(tmp_path):
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n")
    cfg = load_config(None, {"BUILDER_CA_EXTRA_CERTIFICATES": str(pem)})
    base = image_stages(cfg)[0]
    assert base.files == {"extra-ca.crt": pem.read_bytes()}
    stage = render_stage(base, cfg.base.image, "sha256:x")
    assert "COPY extra-ca.crt" in stage.dockerfile
    no_ca = render_stage(image_stages(load_config(None, {}))[0], cfg.base.image, "sha256:x")
    assert no_ca.key != stage.key


def test_extra_ca_must_be_pem(tmp_path):
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a cert")
    with pytest.raises(ConfigError, match="no PEM certificate"):
        image_stages(load_config(None, {"BUILDER_CA_EXTRA_CERTIFICATES": str(bogus)}))


def test_rendered_toolchain_pins_exact_versions():
    cfg = load_config(None, {})
    stage = render_stage(image_stages(cfg)[1], "builder/base:k", "sha256:k")
    assert "gcc-12=12.2.0-14+deb12u1" in stage.dockerfile
    assert "clang-14=1:14.0.6-12" in stage.dockerfile
    assert "FROM builder/base:k" in stage.dockerfile


def test_missing_variable_fails(tmp_path):
    (tmp_path / "t.j2").write_text("FROM {{ parent }}\nRUN echo {{ missing | q }}\n")
    with pytest.raises(BuildError, match="'missing' is undefined"):
        render_template("t.j2", {"parent": "x"}, tmp_path)


def test_compiled_templates_are_kept_in_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "t.j2").write_text("FROM {{ parent }}\nRUN echo {{ word | q }}\n")
    assert render_template("t.j2", {"parent": "x", "word": "a b"}, templates) == "FROM x\nRUN echo 'a b'\n"
    cached = list((tmp_path / "cache" / "builder" / "jinja").iterdir())
    assert len(cached) == 1 and cached[0].stat().st_size > 0 and not cached[0].name.endswith(".tmp")
    # a later process (a fresh Environment) loads that bytecode and renders the same
    _environment.cache_clear()
    (templates / "t.j2").touch()
    assert render_template("t.j2", {"parent": "y", "word": "c"}, templates) == "FROM y\nRUN echo c\n"
    assert list((tmp_path / "cache" / "builder" / "jinja").iterdir()) == cached


def test_templates_render_without_a_writable_cache(tmp_path, monkeypatch):
    (tmp_path / "cache").write_text("a file where the cache dir would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "t.j2").write_text("FROM {{ parent }}\n")
    assert render_template("t.j2", {"parent": "x"}, tmp_path) == "FROM x\n"


def test_select_stages():
    specs = image_stages(load_config(None, {}))
    assert [s.name for s in select_stages(specs, "toolchain")] == ["base", "toolchain"]
    with pytest.raises(ConfigError, match="unknown stage"):
        select_stages(specs, "torch2")


def test_upstream_version():
    assert upstream_version("1:14.0.6-12") == "14.0.6"
    assert upstream_version("12.2.0-14+deb12u1") == "12.2.0"
    assert upstream_version("3.25.1") == "3.25.1"


def test_specs_are_frozen():
    spec = image_stages(load_config(None, {}))[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "x"  # type: ignore[misc]


def test_build_requirements_parsed_merged_and_checked():
    import pytest as _pytest

    from builder.errors import BuildError
    from builder.source.buildreqs import (
        BuildRequirements,
        merge,
        missing_module_hint,
        parse_pyproject,
        parse_requirements_file,
    )

    reqs = parse_requirements_file("# comment\nsetuptools\ncmake>=3.27  # min\n\nnumpy; python_version>='3.10'\n",
                                   "torch:requirements-build.txt")
    assert reqs == ["setuptools", "cmake>=3.27", 'numpy; python_version >= "3.10"']
    with _pytest.raises(BuildError, match=r"requirements-build.txt:1: pip option '-r'"):
        parse_requirements_file("-r other.txt\n", "requirements-build.txt")
    with _pytest.raises(BuildError, match="points at a URL"):
        parse_requirements_file("x @ https://example.invalid/x.whl\n", "r.txt")
    backend, requires = parse_pyproject('[build-system]\nrequires = ["scikit-build-core>=1.0", "cmake>=3.27"]\n'
                                        'build-backend = "scikit_build_core.build"\n', "pyproject.toml")
    assert backend == "scikit_build_core.build"
    assert parse_pyproject("[project]\nname = 'x'\n", "p")[0] == "setuptools.build_meta:__legacy__"
    assert merge(["b", "A"], ["b", "c"]) == ("A", "b", "c")
    info = BuildRequirements("setuptools.build_meta", ("cmake",), ("requirements-build.txt",))
    assert "'pyyaml'" in missing_module_hint("ModuleNotFoundError: No module named 'yaml'\n", info, "x")
    assert "needs 'pyyaml'" in missing_module_hint("ERROR Missing dependencies:\n\tpyyaml\n", info, "x")
    assert missing_module_hint("error: something else", info, "x") is None


def test_deps_stage_key_follows_the_requirements():
    from builder.config import Config
    from builder.stages.plan import deps_stage, render_stage

    cfg = Config()
    one = render_stage(deps_stage(cfg, ("cmake>=3.27", "pyyaml"), ("requirements-build.txt",)), "p", "sha256:1")
    same = render_stage(deps_stage(cfg, ("cmake>=3.27", "pyyaml"), ("requirements-build.txt",)), "p", "sha256:1")
    other = render_stage(deps_stage(cfg, ("cmake>=3.27",), ("requirements-build.txt",)), "p", "sha256:1")
    assert one.key == same.key != other.key
    assert "pyyaml" in one.dockerfile and "pyyaml" not in other.dockerfile


def test_upstream_version_keeps_colons_and_dashes_of_the_upstream_part():
    """deb-version(7): the epoch ends at the first colon, the revision begins at the last
    dash; the upstream part between may hold both."""
    assert upstream_version("1:2.3:4-1") == "2.3:4"
    assert upstream_version("2.3-rc1-5") == "2.3-rc1"
    assert upstream_version("2:1.0-rc-1-2") == "1.0-rc-1"


def test_image_stage_pins_and_compiler_checks_name_the_debian_packages():
    """What the built images are checked against (dpkg-query, the compilers' banners): the
    real bookworm package names, each with its configured version."""
    cfg = load_config(None, {})
    base, toolchain, python = image_stages(cfg)
    tc, py = cfg.toolchain, cfg.python
    assert base.pins == {"ca-certificates": cfg.base.ca_certificates}
    assert toolchain.pins == {
        "gcc-12": tc.gcc, "g++-12": tc.gcc, "clang-14": tc.clang, "ccache": tc.ccache, "cmake": tc.cmake,
        "ninja-build": tc.ninja, "git": tc.git, "make": tc.make,
        f"python{py.version}": py.package_version, f"python{py.version}-dev": py.package_version,
    }
    assert py.version == "3.11" and "python3.11-dev" in toolchain.pins
    assert toolchain.compilers == {"gcc": tc.gcc, "g++": tc.gcc, "clang": tc.clang}
    assert base.compilers == python.compilers == {} and python.pins == {}
    assert toolchain.context["python_series"] == "3.11"
    assert python.context["python_series"] == "3.11"
    assert [s.template for s in (base, toolchain, python)] == [
        "base.Dockerfile.j2", "toolchain.Dockerfile.j2", "python.Dockerfile.j2"]


def test_deps_stage_exact_with_and_without_bazelisk():
    from builder.config import Config
    from builder.stages.plan import deps_stage

    cfg = load_config(None, {"BUILDER_TOOLCHAIN_NPM_REGISTRY": "https://npm.example/registryX/"})
    spec = deps_stage(cfg, ("cmake>=3.27",), (), "7.4.1")
    tc = cfg.toolchain
    assert spec.name == "deps" and spec.template == "deps.Dockerfile.j2"
    assert spec.context == {
        "requirements": ["cmake>=3.27"], "sources": ["none"], "index_url": cfg.python.index_url, "pip_lock": [],
        "bazelisk": {"url": f"https://npm.example/registryX/@bazel/bazelisk/-/bazelisk-{tc.bazelisk}.tgz",
                     "version": tc.bazelisk, "sha512": tc.bazelisk_sha512}}
    plain = deps_stage(Config(), ("pyyaml",), ("requirements-build.txt", "pyproject.toml"))
    assert plain.context["bazelisk"] == {} and plain.context["sources"] == ["requirements-build.txt",
                                                                           "pyproject.toml"]
    rendered = render_stage(spec, "builder/python:k", "sha256:1")
    assert f"bazelisk-{tc.bazelisk}.tgz" in rendered.dockerfile and tc.bazelisk_sha512 in rendered.dockerfile
    assert "bazelisk" not in render_stage(plain, "builder/python:k", "sha256:1").dockerfile


def test_render_stage_keys_on_its_own_name_and_keeps_its_parent():
    spec = image_stages(load_config(None, {}))[2]
    stage = render_stage(spec, "builder/toolchain:abc", "sha256:parent")
    assert stage.parent_ref == "builder/toolchain:abc" and stage.parent_id == "sha256:parent"
    assert stage.key == stage_key("python", stage.dockerfile, "sha256:parent", {}, {})
    assert stage.tag == f"builder/python:{stage.key}" and stage.name == "python"
    assert stage.dockerfile.startswith("FROM builder/toolchain:abc") or "\nFROM builder/toolchain:abc" in \
        stage.dockerfile


def test_unknown_stage_and_unreadable_ca_say_how_to_fix(tmp_path):
    from builder.stages.plan import read_extra_ca

    specs = image_stages(load_config(None, {}))
    with pytest.raises(ConfigError) as err:
        select_stages(specs, "torch2")
    assert (err.value.message, err.value.hint) == ("unknown stage 'torch2'", "choose one of: base, toolchain, python")
    missing = tmp_path / "none.crt"
    with pytest.raises(ConfigError) as err:
        read_extra_ca(load_config(None, {"BUILDER_CA_EXTRA_CERTIFICATES": str(missing)}))
    assert (err.value.message, err.value.hint) == (
        f"ca.extra_certificates: cannot read {missing}: No such file or directory",
        "point it at a PEM bundle, e.g. /etc/ssl/certs/ca-certificates.crt")
    (tmp_path / "x.crt").write_text("not a certificate\n")
    with pytest.raises(ConfigError) as err:
        read_extra_ca(load_config(None, {"BUILDER_CA_EXTRA_CERTIFICATES": str(tmp_path / "x.crt")}))
    assert (err.value.message, err.value.hint) == (f"ca.extra_certificates: {tmp_path / 'x.crt'} holds no PEM "
                                                   "certificate", None)
