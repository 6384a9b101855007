"""The wheel audit end to end (builder.repro.audit, [wheels]): a fixture extension that
links a library outside every manylinux policy (libbz2, through ``-l:libbz2.so.1.0``) and
calls a glibc 2.25 function (getrandom) is built by `builder wheels` in the real build
container with the image's auditwheel: vendored and retagged by default, refused when
``external_libs = "refuse"``, refused with the symbol when an older policy is asked, and
reproduced bit for bit by `builder verify` after the repair."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
import zipfile
from pathlib import Path

import pytest

from tests.conftest import leftover_containers, run_builder, write_config

pytestmark = pytest.mark.docker

# A setuptools project (PEP 517, as the recipes build every package), its C extension
# linking libbz2 by soname: no -dev package needed, the runtime library is in the image.
FILES = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools==80.9.0"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "bz2ver"\nversion = "1.0"\nrequires-python = ">=3.9"\n',
    "setup.py": 'from setuptools import Extension, setup\n\n'
                'setup(packages=["bz2ver"], ext_modules=[Extension("bz2ver._ext", ["bz2ver/_ext.c"], '
                'extra_link_args=["-l:libbz2.so.1.0"])])\n',
    "bz2ver/__init__.py": "from bz2ver._ext import random_byte, version  # noqa: F401\n",
    "bz2ver/_ext.c": r'''#include <Python.h>
#include <sys/random.h>

const char *BZ2_bzlibVersion(void); /* libbz2.so.1.0 */

static PyObject *version(PyObject *self, PyObject *args) { return PyUnicode_FromString(BZ2_bzlibVersion()); }

static PyObject *random_byte(PyObject *self, PyObject *args) {
    unsigned char b = 0;
    if (getrandom(&b, 1, 0) != 1) return PyErr_SetFromErrno(PyExc_OSError); /* GLIBC_2.25 */
    return PyLong_FromLong(b);
}

static PyMethodDef methods[] = {{"version", version, METH_NOARGS, ""}, {"random_byte", random_byte, METH_NOARGS, ""},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, methods};
PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&module); }
''',
}
PACKAGE = ('[packages.bz2ver]\nrepo = "file://{repo}"\nbuilds_against = []\n'
           'smoke = "import bz2ver; print(bz2ver.version())"\n')


def write_repo(dest: Path) -> Path:
    for rel, text in FILES.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    git_env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
               "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "bz2ver"]):
        subprocess.run(["git", "-C", str(dest), *args], check=True, env=git_env)
    return dest


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("audit")
    repo = write_repo(root / "repos" / "bz2ver")
    volume = f"builder-test-ccache-{uuid.uuid4().hex[:8]}"
    extra = f'[cache]\nccache = "volume:{volume}"\n' + PACKAGE.format(repo=repo)
    cfg = write_config(root / "builder.toml", root / "data", extra)
    yield {"root": root, "cfg": cfg, "extra": extra, "index": root / "data" / "index"}
    engine.remove_volume(volume)


def published(index: Path) -> list[str]:
    return sorted(p.name for p in (index / "files").glob("*.whl")) if (index / "files").is_dir() else []


@pytest.fixture(scope="module")
def vendored(env):
    done = run_builder("wheels", "--pkg", "bz2ver=main", "--json", config=env["cfg"])
    assert done.returncode == 0, done.stderr[-3000:]
    return next(w for w in json.loads(done.stdout)["wheels"] if w["recipe"] == "bz2ver"), done


def test_an_outside_library_is_vendored_and_the_wheel_retagged(env, vendored, engine):
    wheel, done = vendored
    # getrandom (GLIBC_2.25) is the one symbol manylinux_2_24 lacks: the tightest policy is 2_26
    assert wheel["filename"] == "bz2ver-1.0-cp311-cp311-manylinux_2_26_x86_64.whl", wheel["filename"]
    assert wheel["platform"]["limited_by"] == ["GLIBC_2.25 (libc.so.6)"]
    assert wheel["platform"]["vendored"] == ["libbz2.so.1.0"]
    with zipfile.ZipFile(env["index"] / "files" / wheel["filename"]) as z:
        grafted = [n for n in z.namelist() if n.startswith("bz2ver.libs/")]
        tags = [line for line in z.read("bz2ver-1.0.dist-info/WHEEL").decode().splitlines() if line.startswith("Tag:")]
    assert len(grafted) == 1 and grafted[0].startswith("bz2ver.libs/libbz2-"), grafted
    assert tags == ["Tag: cp311-cp311-manylinux_2_26_x86_64"]
    # the summary of a rerun (the wheel reused: what its manifest recorded)
    again = run_builder("wheels", "--pkg", "bz2ver=main", config=env["cfg"], env={"COLUMNS": "200"})
    assert again.returncode == 0 and "reused" in again.stderr, again.stderr[-3000:]
    said = again.stdout + again.stderr
    assert "bz2ver: manylinux_2_26_x86_64 (limited by GLIBC_2.25 (libc.so.6)); vendored libbz2.so.1.0" in said, said
    manifest = json.loads((env["index"] / "files" / f"{wheel['filename']}.manifest.json").read_text())
    assert manifest["platform"]["policy"] == "manylinux_2_26"
    assert manifest["platform"]["auditwheel"] == "6.8.2"  # the image's, read from its metadata
    listed = run_builder("index", "list", config=env["cfg"], env={"COLUMNS": "200"})
    assert listed.returncode == 0 and "GLIBC_2.25" in listed.stdout
    assert leftover_containers(engine, env) == []


def test_verify_rebuilds_the_repaired_wheel_bit_for_bit(env, vendored):
    wheel, _ = vendored
    done = run_builder("verify", wheel["filename"], config=env["cfg"])
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "reproduced" in (done.stdout + done.stderr).lower(), done.stdout + done.stderr


def other_data(env, name: str, setting: str) -> tuple[Path, Path]:
    data = env["root"] / name
    return write_config(env["root"] / f"{name}.toml", data, env["extra"] + setting), data / "index"


def test_refuse_names_the_library_and_publishes_nothing(env):
    cfg, index = other_data(env, "refuse", '[wheels]\nexternal_libs = "refuse"\n')
    done = run_builder("wheels", "--pkg", "bz2ver=main", config=cfg)
    assert done.returncode == 1, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "links shared libraries outside its manylinux policy: libbz2.so.1.0 (/" in errors[0]
    assert 'external_libs = "vendor"' in done.stderr and "Traceback" not in done.stderr
    assert published(index) == []


def test_an_older_policy_asked_is_refused_with_the_symbol(env):
    cfg, index = other_data(env, "plat", "")
    done = run_builder("wheels", "--pkg", "bz2ver=main", config=cfg, env={"BUILDER_WHEELS_PLAT": "manylinux_2_17"})
    assert done.returncode == 1, done.stderr[-3000:]
    assert ("the wheel does not meet [wheels] plat manylinux_2_17: it needs GLIBC_2.25 (libc.so.6) "
            "(it meets manylinux_2_26)") in done.stderr, done.stderr[-3000:]
    assert published(index) == []


def test_a_bad_plat_setting_is_refused_before_anything_runs(env):
    done = run_builder("wheels", "--pkg", "bz2ver=main", config=env["cfg"], env={"BUILDER_WHEELS_PLAT": "centos7"})
    assert done.returncode == 2, done.stderr
    assert "wheels.plat 'centos7' is not a valid platform policy" in done.stderr and "Traceback" not in done.stderr


# The host's zipfile made to deflate with zlib-ng (as on a host whose python links
# zlib-ng-compat, e.g. Fedora's): had the host re-zipped the wheel, its bytes would differ
# (tests/unit/test_normalize_container.py shows the two zlib builds write other bytes).
ZLIB_NG_SITE = '''import os, zipfile
import zlib_ng.zlib_ng as zlib_ng
zipfile.zlib = zlib_ng
with open(os.environ["BUILDER_TEST_ZLIB_MARK"], "a") as mark:
    mark.write(f"{os.getpid()} zlib-ng {zlib_ng.ZLIBNG_VERSION}\\n")
'''


def test_a_host_with_another_zlib_builds_the_same_bytes(env, vendored):
    wheel, _ = vendored
    site = env["root"] / "zlib-ng-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(ZLIB_NG_SITE)
    mark = env["root"] / "zlib-ng-used.txt"
    cfg, index = other_data(env, "zlibng", "")
    done = run_builder("wheels", "--pkg", "bz2ver=main", "--json", config=cfg,
                       env={"PYTHONPATH": str(site), "BUILDER_TEST_ZLIB_MARK": str(mark)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "zlib-ng 2.3.3" in mark.read_text()  # the builder process deflated with zlib-ng
    again = next(w for w in json.loads(done.stdout)["wheels"] if w["recipe"] == "bz2ver")
    assert again["status"] == "built" and again["filename"] == wheel["filename"]
    assert again["sha256"] == wheel["sha256"]
    manifest = json.loads((index / "files" / f"{wheel['filename']}.manifest.json").read_text())
    # the bytes are the python stage's: Debian bookworm's python3.11 and zlib1g
    assert manifest["normalizer"] == {"version": "2", "python": "3.11.2", "zlib": "1.2.13"}
