"""builder.repro.manifest: in-toto/SLSA shape, secrets filtered, schema validation, rebuild spec."""

from __future__ import annotations

import copy
import json

import pytest

from builder.repro.manifest import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    ImageRef,
    ManifestError,
    Provenance,
    StepRecord,
    build_manifest,
    rebuild_spec,
    redact_url,
    safe_env,
    schema_errors,
    scrub,
    strip_url_credentials,
    validate_manifest,
)

SECRET = "s3cr3t-planted"
INDEX_PASSWORD = "index-pw-planted"
SHA = "a" * 40
WHEEL_SHA = "b" * 64
IMAGE = "sha256:" + "c" * 64


def record(**overrides) -> StepRecord:
    values = dict(
        wheel="torch-2.99.0a0+gitaaaaaaa-cp311-cp311-linux_x86_64.whl", sha256=WHEEL_SHA,
        build_key="0123456789abcdef" * 2,
        recipe="torch", command=["python", "setup.py", "bdist_wheel", "--dist-dir", "/out/dist"],
        source_url="https://ci:ghp_tokenvalue@github.com/pytorch/pytorch.git", source_sha=SHA,
        submodules={"third_party/fakefmt": "d" * 40}, commit_time=1704067200, source_date_epoch=1704067200,
        image_tag="builder/python:abc", image_id=IMAGE,
        env={"USE_CUDA": "0", "BUILD_TEST": "0", "SOURCE_DATE_EPOCH": "1704067200",
             "BUILDER_TEST_TOKEN": SECRET, "HF_api_key": "k-123456", "AWS_SECRET_ACCESS_KEY": "x" * 20,
             "MIRROR": "https://user:hunter2@mirror.example/simple", "INNOCENT": f"prefix-{INDEX_PASSWORD}"},
        jobs=2, started=1_700_000_000.25, finished=1_700_000_100.5,
        ccache={"direct_hits": 1, "misses": 2, "hit_rate": 0.3333}, builder_version="0.1.0",
    )
    values.update(overrides)
    return StepRecord(**values)


PROV = Provenance(ref="main", images=(ImageRef("base-image", "builder/debian:bookworm-minbase", "sha256:" + "1" * 64),
                                      ImageRef("base", "builder/base:k1", "sha256:" + "2" * 64, "k1"),
                                      ImageRef("toolchain", "builder/toolchain:k2", "sha256:" + "3" * 64, "k2"),
                                      ImageRef("python", "builder/python:abc", IMAGE, "k3")),
                  compilers={"gcc": "gcc (Debian 12.2.0-14) 12.2.0", "clang": "Debian clang version 14.0.6"})
ENVIRON = {"BUILDER_INDEX_PASSWORD": INDEX_PASSWORD, "BUILDER_TEST_TOKEN": SECRET, "PATH": "/usr/bin"}


@pytest.fixture
def manifest():
    return build_manifest(record(), PROV, ENVIRON)


def test_statement_shape(manifest):
    assert manifest["_type"] == STATEMENT_TYPE and manifest["predicateType"] == PREDICATE_TYPE
    assert manifest["subject"] == [{"name": record().wheel, "digest": {"sha256": WHEEL_SHA}}]
    assert manifest["build_key"] == "0123456789abcdef" * 2  # the index finds reusable wheels by it
    definition = manifest["predicate"]["buildDefinition"]
    assert definition["externalParameters"]["source"] == {
        "uri": "https://github.com/pytorch/pytorch.git", "ref": "main", "sha": SHA}
    names = [m["name"] for m in definition["resolvedDependencies"]]
    assert names == ["source", "submodule:third_party/fakefmt", "image:base-image", "image:base",
                     "image:toolchain", "image:python"]
    assert definition["resolvedDependencies"][0]["digest"] == {"gitCommit": SHA}
    assert definition["resolvedDependencies"][-1]["digest"] == {"sha256": "c" * 64}
    run = manifest["predicate"]["runDetails"]
    assert run["metadata"] == {"invocationId": "0123456789abcdef" * 2, "startedOn": "2023-11-14T22:13:20.250000Z",
                               "finishedOn": "2023-11-14T22:15:00.500000Z"}
    assert run["builder"]["version"] == {"builder": "0.1.0"}
    assert run["sourceDateEpoch"] == 1704067200 and run["compilers"]["gcc"].startswith("gcc (Debian 12.2.0")
    assert run["ccache"]["misses"] == 2
    json.dumps(manifest)  # serializable


def test_manifest_lists_the_wheels_built_against_and_the_checkout():
    m = build_manifest(record(recipe="xla", against=("torch==2.99.0",), against_sha256=("e" * 64,),
                              checkout_recipe="torch", checkout_url="https://u:tok@example.org/pytorch.git",
                              checkout_sha="f" * 40),
                       Provenance(ref="main", against_wheels=("torch-2.99.0-cp311-cp311-linux_x86_64.whl",)), {})
    assert m["against_sha256"] == ["e" * 64]
    assert m["predicate"]["buildDefinition"]["internalParameters"]["against"] == ["torch==2.99.0"]
    wheel, checkout = m["predicate"]["buildDefinition"]["resolvedDependencies"][-2:]
    assert wheel == {"name": "against:torch", "uri": "torch-2.99.0-cp311-cp311-linux_x86_64.whl",
                     "digest": {"sha256": "e" * 64}}
    assert checkout == {"name": "checkout:torch", "uri": "git+https://example.org/pytorch.git",
                        "digest": {"gitCommit": "f" * 40}}
    validate_manifest(m)
    spec = rebuild_spec(m)
    assert (spec.against, spec.against_sha256) == (("torch==2.99.0",), ("e" * 64,))
    assert (spec.checkout_recipe, spec.checkout_sha) == ("torch", "f" * 40)


def test_secrets_never_in_the_manifest(manifest):
    text = json.dumps(manifest)
    for secret in (SECRET, INDEX_PASSWORD, "k-123456", "x" * 20, "hunter2", "ghp_tokenvalue"):
        assert secret not in text, secret
    env = manifest["predicate"]["buildDefinition"]["internalParameters"]["env"]
    assert env == {"USE_CUDA": "0", "BUILD_TEST": "0", "SOURCE_DATE_EPOCH": "1704067200",
                   "INNOCENT": "prefix-<redacted>"}
    assert manifest["predicate"]["buildDefinition"]["internalParameters"]["redactedEnv"] == [
        "AWS_SECRET_ACCESS_KEY", "BUILDER_TEST_TOKEN", "HF_api_key", "MIRROR"]


def test_secret_filters():
    assert safe_env({"GITHUB_TOKEN": "x", "Db_Password": "y", "MY_CREDENTIALS": "z", "SSH_KEY": "k",
                     "A": "1"}) == ({"A": "1"}, ["Db_Password", "GITHUB_TOKEN", "MY_CREDENTIALS", "SSH_KEY"])
    assert strip_url_credentials("see https://u:p@h.example/x and git+ssh://tok@host/r") == \
        "see https://h.example/x and git+ssh://host/r"
    assert strip_url_credentials("git+file:///src/repo@" + SHA) == "git+file:///src/repo@" + SHA
    assert redact_url("https://user:pw@example.com:8443/simple/") == "https://example.com:8443/simple/"
    assert redact_url("file:///tmp/repo") == "file:///tmp/repo"
    assert scrub({"k": ["a-s3cr3t-b", 3]}, ["s3cr3t"]) == {"k": ["a-<redacted>-b", 3]}


def test_manifest_validates_against_the_schema(manifest):
    assert schema_errors(manifest) == []
    validate_manifest(manifest)


@pytest.mark.parametrize("breakage, where", [
    (lambda m: m.pop("build_key"), "build_key"),
    (lambda m: m["subject"][0]["digest"].update(sha256="xyz"), "subject/0/digest/sha256"),
    (lambda m: m["predicate"]["buildDefinition"]["internalParameters"]["env"].update(GH_TOKEN="t"), "env"),
    (lambda m: m["predicate"]["buildDefinition"]["internalParameters"]["env"].update(
        URL="https://a:b@host/x"), "env/URL"),
    (lambda m: m["predicate"]["buildDefinition"]["externalParameters"]["source"].update(
        uri="https://a:b@host/x"), "source/uri"),
    (lambda m: m.update(_type="https://in-toto.io/Statement/v0.1"), "_type"),
    (lambda m: m["predicate"]["runDetails"].pop("compilers"), "runDetails"),
])
def test_schema_rejects_broken_manifests(manifest, breakage, where):
    broken = copy.deepcopy(manifest)
    breakage(broken)
    errors = schema_errors(broken)
    assert errors and any(where in e for e in errors), errors
    with pytest.raises(ManifestError, match="does not match manifest.schema.json"):
        validate_manifest(broken)


def test_rebuild_spec_reads_what_verify_needs(manifest):
    spec = rebuild_spec(manifest)
    assert (spec.recipe, spec.source_sha, spec.image_id, spec.source_date_epoch) == ("torch", SHA, IMAGE, 1704067200)
    assert spec.source_url == "https://github.com/pytorch/pytorch.git"
    assert spec.env["USE_CUDA"] == "0" and "BUILDER_TEST_TOKEN" in spec.redacted_env
    with pytest.raises(ManifestError, match="not a provenance statement"):
        rebuild_spec({"build_key": "abc"})
