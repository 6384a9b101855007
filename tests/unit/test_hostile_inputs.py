"""A corpus of hostile inputs across commands, each run through the real CLI.

Every case must end with the documented exit code (2: wrong option, config or value;
1: an operation that failed), exactly one ``error:`` line naming what was wrong, no
traceback, no secret echoed, and nothing written to the data dir or the index. Docker is
pointed at a socket that does not exist: every case is refused before any engine call
(a case that reached Docker would fail with a different message and be caught).
No image is built, so the corpus runs in seconds.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import run_builder

LONG = "a" * 100_000
SECRET = "hunter2-s3cret"


@dataclass
class Case:
    id: str
    args: list[str]
    code: int
    words: str  # in the error line
    toml: str | bytes | None = None  # builder.toml written into the working directory
    env: dict[str, str] = field(default_factory=dict)


def config_case(id: str, toml: str | bytes, words: str) -> Case:
    return Case(id, ["config"], 2, words, toml=toml)


def env_case(id: str, name: str, value: str, words: str) -> Case:
    return Case(id, ["config"], 2, words, env={name: value})


CASES = [
    # builder.toml: markup, control characters, NUL, non-UTF-8, numbers, URLs, paths
    config_case("toml-closing-markup", '[toolchain]\ngcc = "[/x]"\n', "toolchain.gcc '[/x]' is not a valid Debian"),
    config_case("toml-bold-markup", '[cache]\nccache = "volume:[bold]x[/bold]"\n', "'volume:[bold]x[/bold]'"),
    config_case("toml-markup-key", '[build]\n"[/x]" = 1\n', "unknown key build.[/x]"),
    config_case("toml-markup-section", '["[red]x"]\na = 1\n', "unknown section [[red]x]"),
    config_case("toml-emoji-code", '[toolchain]\ngcc = ":smile:"\n', "toolchain.gcc ':smile:'"),
    config_case("toml-non-utf8", b'[toolchain]\ngcc = "12\xff"\n', "builder.toml:2: not UTF-8 text (byte 0xff)"),
    config_case("toml-raw-nul", b'[toolchain]\ngcc = "1\x00"\n', "invalid TOML"),
    config_case("toml-escaped-nul-path", 'data_dir = "/tmp/a\\u0000b"\n', "data_dir contains a control character"),
    config_case("toml-escape-sequence", '[toolchain]\ngcc = "\\u001b[2J12"\n', "toolchain.gcc contains a control"),
    config_case("toml-bidi-override", '[toolchain]\ngcc = "12\\u202e1-"\n', "\\u202e"),
    config_case("toml-nan", "[build]\nmemory_per_job_gib = nan\n", "must be a finite number, got nan"),
    config_case("toml-inf", "[build]\ncpu_limit = inf\n", "must be a finite number, got inf"),
    config_case("toml-negative-jobs", "[build]\njobs = -3\n", "build.jobs must be between 0 and 4096, got -3"),
    config_case("toml-huge-int", "[build]\njobs = 123456789012345678901234567890\n", "build.jobs must be between"),
    config_case("toml-huge-float", "[build]\nmemory_limit_gib = 1e308\n", "build.memory_limit_gib must be between"),
    config_case("toml-negative-disk", "[build]\nmin_free_disk_gib = -1.5\n", "must be between 0"),
    config_case("toml-bool-as-int", "[build]\njobs = true\n", "build.jobs must be an integer"),
    config_case("toml-over-long", f'[toolchain]\ngcc = "{LONG}"\n', "toolchain.gcc is too long"),
    config_case("toml-ipv6-mirror", '[base]\nmirror = "http://[::1/"\n', "is not a valid URL"),
    config_case("toml-credentials-url", f'[python]\nindex_url = "https://ci:{SECRET}@[::1/simple"\n',
                "'https://***@[::1/simple' is not a valid URL"),
    config_case("toml-option-as-repo", '[repos]\ntorch = "--upload-pack=touch /tmp/x"\n', "repos.torch"),
    config_case("toml-unset-variable", 'data_dir = "$NO_SUCH_VARIABLE_I16/x"\n', "which is not set"),
    config_case("toml-table-as-value", "build = 3\n", "[build] must be a table"),
    config_case("toml-typo-key", '[toolchain]\nclnag = "14"\n', "did you mean clang? known keys in [toolchain]: "),
    config_case("toml-typo-section", "[biuld]\njobs = 1\n", "did you mean [build]?"),
    # BUILDER_* environment variables
    env_case("env-negative-jobs", "BUILDER_BUILD_JOBS", "-3", "build.jobs must be between 0 and 4096, got -3"),
    env_case("env-nan-jobs", "BUILDER_BUILD_JOBS", "nan", "build.jobs must be an integer, got 'nan'"),
    env_case("env-inf-cpus", "BUILDER_BUILD_CPU_LIMIT", "inf", "must be a finite number"),
    env_case("env-nan-memory", "BUILDER_BUILD_MEMORY_PER_JOB_GIB", "NaN", "must be a finite number"),
    env_case("env-huge-number", "BUILDER_BUILD_MEMORY_LIMIT_GIB", "1e999", "must be a finite number"),
    env_case("env-typo-key", "BUILDER_BUILD_JBOS", "3", "did you mean BUILDER_BUILD_JOBS?"),
    env_case("env-escape-path", "BUILDER_DATA_DIR", "/tmp/\x1b[2Jx", "contains a control character"),
    env_case("env-markup", "BUILDER_TOOLCHAIN_GCC", "[/x]", "toolchain.gcc '[/x]'"),
    env_case("env-over-long", "BUILDER_TOOLCHAIN_GCC", "1" * 100_000, "toolchain.gcc is too long"),
    # options and arguments
    Case("jobs-negative", ["wheels", "--torch", "main", "--jobs", "-3"], 2, "'--jobs' / '-j': -3 is not between"),
    Case("jobs-not-a-number", ["wheels", "--torch", "main", "--jobs", "[/x]"], 2, "'--jobs' / '-j'"),
    Case("keep-zero-before-build", ["nightly", "--keep", "0"], 2, "'--keep': 0 is not between 1 and"),
    Case("prune-keep-negative", ["index", "prune", "--keep", "-1"], 2, "'--keep': -1 is not between 1"),
    Case("retries-negative", ["push", "x.whl", "--to", "http://127.0.0.1:9/", "--retries", "-5"], 2,
         "'--retries': -5 is not between 0"),
    Case("backoff-negative", ["push", "x.whl", "--to", "http://127.0.0.1:9/", "--backoff", "-1"], 2,
         "'--backoff': -1.0 is not between 0"),
    Case("backoff-nan", ["push", "x.whl", "--to", "http://127.0.0.1:9/", "--backoff", "nan"], 2,
         "'--backoff': nan is not a finite number"),
    Case("backoff-inf", ["push", "x.whl", "--to", "http://127.0.0.1:9/", "--backoff", "inf"], 2,
         "'--backoff': inf is not a finite number"),
    Case("port-out-of-range", ["index", "serve", "--port", "99999"], 2, "'--port': 99999 is not between 1"),
    Case("push-ipv6-literal", ["push", "x.whl", "--to", "http://[::1/"], 2, "'http://[::1/' is not a valid URL"),
    Case("push-credentials-ipv6", ["push", "x.whl", "--to", f"http://ci:{SECRET}@[::1/"], 2,
         "'http://***@[::1/' is not a valid URL"),
    Case("push-credentials-bad-port", ["push", "x.whl", "--to", f"http://ci:{SECRET}@host:99999/"], 2,
         "has an invalid port"),
    Case("ref-markup", ["wheels", "--torch", "[/x]"], 2, "--torch '[/x]' is not a valid git ref"),
    Case("ref-command-substitution", ["wheels", "--torch", "$(id)"], 2, "--torch '$(id)' is not a valid git ref"),
    Case("ref-over-long", ["wheels", "--torch", LONG[:5000]], 2, "--torch is too long"),
    Case("ref-not-utf8", ["wheels", "--torch", "main\udcff"], 2, "\\udcff"),
    Case("repo-shell", ["wheels", "--torch", "main", "--torch-repo", "file:///x;id"], 2,
         "contains characters not allowed in a repository URL"),
    Case("repo-ipv6-literal", ["wheels", "--torch", "main", "--torch-repo", "https://[::1/x.git"], 2,
         "is not a valid URL"),
    Case("repo-unreachable-hint", ["wheels", "--torch", "main", "--torch-repo", "file:///nonexistent/[/x]"], 1,
         "check --torch-repo/--xla-repo (or [repos] in builder.toml)"),
    Case("show-path-traversal", ["index", "show", "../../etc/passwd"], 1, "must be a bare wheel file name"),
    Case("show-markup-name", ["index", "show", "[bold]x[/bold]-1.0-py3-none-any.whl"], 1, "[bold]x[/bold]"),
    Case("fetch-markup-spec", ["index", "fetch", "torch==[/x]"], 2, "SPEC 'torch==[/x]' is not a requirement"),
    Case("fetch-url-spec", ["index", "fetch", "torch @ https://x/t.whl"], 2, "not a URL or option"),
    Case("ci-markup-system", ["ci", "render", "[/x]"], 1, "no workflow for CI system '[/x]'"),
    Case("cache-markup-volume", ["cache", "path", "--ccache", "volume:[bold]x"], 2, "'volume:[bold]x'"),
    Case("config-file-markup-name", ["--config", "[/x].toml", "config"], 2, "config file [/x].toml not found"),
    Case("render-out-proc", ["render", "--out", "/proc/x"], 1, "--out /proc/x: cannot write there"),
    Case("demo-workdir-proc", ["demo", "--workdir", "/proc/d"], 1, "--workdir /proc/d: cannot write there"),
    Case("unknown-option-markup", ["wheels", "--[/x]"], 2, "no such option: --[/x]"),
    Case("verify-path-traversal", ["verify", "../x.whl"], 1, "'../x.whl' must be a bare wheel file name"),
    Case("verify-unknown-wheel", ["verify", "x-1.0-py3-none-any.whl"], 1, "x-1.0-py3-none-any.whl is not in the index"),
    Case("fetch-from-ipv6-literal", ["index", "fetch", "torch==2.9.0", "--from", "http://[::1/"], 2,
         "--from 'http://[::1/' is not a valid URL"),
    Case("fetch-from-credentials", ["index", "fetch", "torch==2.9.0", "--from", f"https://ci:{SECRET}@[::1/"], 2,
         "--from 'https://***@[::1/' is not a valid URL"),
    Case("fetch-from-missing-dir", ["index", "fetch", "torch==2.9.0", "--from", "/nonexistent/[/x]"], 2,
         "--from /nonexistent/[/x]: not a URL or an existing directory"),
    Case("add-missing-file", ["index", "add", "/nonexistent/x-1.0-py3-none-any.whl"], 1, "no such file"),
    Case("add-not-a-wheel-name", ["index", "add", "/etc/passwd"], 1, "'passwd' is not a valid wheel file name"),
    Case("push-missing-file", ["push", "/nonexistent/x-1.0-py3-none-any.whl", "--to", "http://127.0.0.1:9/"], 1,
         "cannot read the file"),
    Case("serve-host-ipv6-literal", ["index", "serve", "--host", "[::1/"], 2, "host '[::1/' is not a valid host"),
    Case("serve-auth-missing", ["index", "serve", "--auth", "/nonexistent/[/x]"], 2,
         "htpasswd file /nonexistent/[/x] does not exist"),
    Case("xla-check-missing-script", ["xla-check", "/nonexistent/[/x].py"], 2, "/nonexistent/[/x].py"),
    # not Python: refused before the 4 GB of torch + torch_xla are fetched (no data dir made)
    Case("xla-check-not-python", ["xla-check", "/etc/passwd"], 2, "/etc/passwd is not a Python script (line 1: "),
    Case("xla-check-binary", ["xla-check", sys.executable], 2, f"{sys.executable} is not a Python script ("),
    # an index dir that is a file: not "no wheels in ..." with exit 0
    Case("index-dir-is-a-file", ["index", "list"], 2, "the index directory /etc/passwd is a file, not a directory",
         env={"BUILDER_INDEX_DIR": "/etc/passwd"}),
    Case("index-dir-flag-is-a-file", ["index", "list", "--dir", "/etc/passwd"], 2,
         "the index directory /etc/passwd is a file"),
]


def test_corpus_is_large_enough():
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)


def snapshot(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_one_clean_error(case: Case, tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    if case.toml is not None:
        path = work / "builder.toml"
        path.write_bytes(case.toml if isinstance(case.toml, bytes) else case.toml.encode())
    data = tmp_path / "data"
    env = {"BUILDER_DATA_DIR": str(data), "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
           "BUILDER_INDEX_PASSWORD": "", "NO_SUCH_VARIABLE_I16": "", **case.env}
    env.pop("NO_SUCH_VARIABLE_I16")
    before = snapshot(work)
    done = run_builder(*case.args, env=env, cwd=work, timeout=120)
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if line.lower().startswith("error")]
    assert done.returncode == case.code, output[-3000:]
    assert len(errors) == 1, output[-3000:]
    assert case.words in errors[0], errors[0][:3000]
    assert len(errors[0]) < 5000  # an over-long value is shortened, not echoed whole
    assert "Traceback" not in output and "╭" not in output
    assert SECRET not in output
    assert not data.exists(), snapshot(data)  # no data dir, no index, no crash log
    assert snapshot(work) == before
