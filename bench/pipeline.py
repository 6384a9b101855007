#!/usr/bin/env python3
"""Benchmarks of the fixture pipeline, printed as ratios measured in one run.

    python bench/pipeline.py [--rounds N] [--keep]      (make bench)

Per round: (a) cold build vs no-op rerun; (b) one-file-change rebuild vs cold; (c) a
second teammate (other checkout path, other uid) with the shared cache vs cold; (d) a
second machine (empty local cache + Redis remote) vs cold; (e) the container build vs the
same PEP 517 build on the host with the same jobs (container overhead); (f) the fixed cost
of the teammate's full-hit rebuild (wall time less the compile span of its ninja log),
split into the run's phases (``builder wheels --json`` "phases"); (g) the same full-hit
rebuild on the host (a new clone, warm host ccache) and what builder adds to it. Each figure is printed
as soon as it is measured; at the end, the median of the rounds with the spread (min-max)
against its goal. Needs Docker, redis-server, ccache, cmake and ninja on the host: all are
checked before anything starts. Not a test: it asserts nothing.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from builder.examples import commit_change, write_example_repo
from builder.report import profile

HOST_CA = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
HOST_TOOLS = {"redis-server": "redis-server", "ccache": "ccache", "cmake": "cmake", "ninja": "ninja-build"}
# Goals (#32): figure -> (limit, how it compares, unit)
GOALS = {"no-op rerun (s)": (0.5, "<"), "full-hit fixed cost (s)": (2.0, "<"), "one-file / cold": (0.10, "<"),
         "container / host": (1.05, "<="), "builder's own fixed cost (s)": (2.0, "<")}


def prerequisites() -> list[str]:
    """What is missing, each with how to get it (checked before any build)."""
    missing = [f"{tool} (apt-get install -y {package})" for tool, package in HOST_TOOLS.items()
               if shutil.which(tool) is None]
    try:
        answer = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                                text=True, timeout=30)
        if answer.returncode != 0:
            missing.append("a Docker engine (sudo .ci/dockerd-up)")
    except (OSError, subprocess.TimeoutExpired):
        missing.append("a Docker engine and its CLI (apt-get install -y docker.io; sudo .ci/dockerd-up)")
    return missing


def figure(name: str, value: float, detail: str = "") -> None:
    print(f"  {name:<28} {value:9.3f}  {detail}", flush=True)


def builder(cfg: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, dict]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "builder", "--config", str(cfg), "wheels", "--json", *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"builder failed:\n{done.stderr}")
    return seconds, json.loads(done.stdout)


def config(root: Path, name: str, repo: Path, ccache: str, extra: str = "") -> Path:
    data = root / name
    data.mkdir(parents=True, exist_ok=True)
    path = data / "builder.toml"
    path.write_text(f'data_dir = "{data}"\n[ca]\nextra_certificates = "{HOST_CA}"\n'
                    f'[repos]\ntorch = "file://{repo}"\n[cache]\nccache = "{ccache}"\n{extra}')
    return path


def rate(report: dict, field: str = "hit_rate") -> str:
    cc = report["wheels"][0].get("ccache") or {}
    calls = cc.get("direct_hits", 0) + cc.get("preprocessed_hits", 0) + cc.get("misses", 0)
    if field == "remote":
        return f"remote hits {cc.get('remote_hits', 0)}/{calls}"
    return f"hits {cc.get('hit_rate', 0):.0%} (direct {cc.get('direct_hits', 0)}/{calls})"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_build(repo: Path, jobs: int, work: Path, name: str = "host-src") -> float:
    """The same PEP 517 build on the host, same env, jobs and build requirements, in a new
    clone ``name``, with the host's own ccache (cold the first time, warm after)."""
    tree = work / name
    subprocess.run(["git", "clone", "-q", "--recurse-submodules", "-c", "protocol.file.allow=always",
                    str(repo), str(tree)], check=True,
                   env={**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow",
                        "GIT_CONFIG_VALUE_0": "always"})
    env = {**os.environ, "MAX_JOBS": str(jobs), "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs), "USE_CUDA": "0",
           "BUILD_TEST": "0",
           "CMAKE_C_COMPILER_LAUNCHER": "ccache", "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
           "CCACHE_DIR": str(work / "host-ccache"), "CCACHE_BASEDIR": str(tree), "CCACHE_NOHASHDIR": "1"}
    shutil.rmtree(work / "host-dist", ignore_errors=True)
    # The python stage's and the commit's build requirements (the deps layer), in a venv of
    # their own (not in the timing); PATH puts its cmake and ninja first, as in the image.
    venv = work / "host-venv"
    if not venv.is_dir():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "setuptools==80.9.0", "wheel==0.45.1",
                        "packaging==25.0", "build==1.6.1", "-r", str(tree / "requirements-build.txt")], check=True)
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    started = time.monotonic()
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "build", "--wheel", "--no-isolation",
                           "-Cbuild-dir=build", "--outdir", str(work / "host-dist")],
                          cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"host build failed:\n{done.stderr[-2000:]}")
    return time.monotonic() - started


def compile_span(report: dict) -> float:
    """Seconds from the first compile's start to the last's end in the step's ninja log."""
    path = report["wheels"][0].get("profile")
    units = profile.load(Path(path)).units if path and Path(path).is_file() else []
    return (max(u.end_ms for u in units) - min(u.start_ms for u in units)) / 1000 if units else 0.0


def one_round(root: Path, tag: str, remote: str) -> dict[str, float]:
    """Every figure of one round, each printed as it is measured."""
    volumes = [f"builder-bench-{n}-{tag}" for n in ("shared", "fresh", "overhead")]
    out: dict[str, float] = {}
    try:
        repo = write_example_repo("faketorch", root / "repos" / "faketorch", heavy=True)  # 1.4 s a unit, as real
        alice = config(root, "alice", repo, f"volume:{volumes[0]}")
        cold, cold_report = builder(alice, "--torch", "main", "--no-smoke", "--user", "1000:1000",
                                    "--ccache-remote", remote)
        jobs = cold_report["jobs"]
        figure("cold build (s)", cold, f"{jobs} jobs")
        out["no-op rerun (s)"], _ = builder(alice, "--torch", "main", "--no-smoke", "--user", "1000:1000",
                                            "--ccache-remote", remote)
        figure("no-op rerun (s)", out["no-op rerun (s)"], f"{out['no-op rerun (s)'] / cold:.1%} of cold")
        commit_change(repo, "csrc/kernels/kernel_000.cpp")
        one_file, one_report = builder(alice, "--torch", "main", "--no-smoke", "--user", "1000:1000")
        out["one-file / cold"] = one_file / cold
        figure("one-file / cold", out["one-file / cold"], f"{one_file:.2f} s, {rate(one_report)}")
        bob = config(root, "bob/other/path", repo, f"volume:{volumes[0]}")
        mate, mate_report = builder(bob, "--torch", "main", "--no-smoke", "--user", "1001:1000")
        out["teammate / cold"] = mate / cold
        figure("teammate / cold", out["teammate / cold"], f"{mate:.2f} s, {rate(mate_report)}")
        span = compile_span(mate_report)
        out["full-hit fixed cost (s)"] = mate - span
        phases = mate_report.get("phases", {})
        figure("full-hit fixed cost (s)", mate - span, f"{mate:.2f} s less a compile span of {span:.2f} s")
        print("    phases: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(phases.items(), key=lambda i: -i[1])),
              flush=True)
        for name, seconds in phases.items():
            out[f"phase {name} (s)"] = seconds
        carol = config(root, "carol", repo, f"volume:{volumes[1]}")
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "HEAD~1"], check=True)
        subprocess.run(["git", "-C", str(repo), "branch", "-q", "-f", "bench-first", "HEAD"], check=True)
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
        machine, machine_report = builder(carol, "--torch", "bench-first", "--no-smoke", "--ccache-remote", remote)
        out["2nd machine / cold"] = machine / cold
        figure("2nd machine + Redis / cold", machine / cold, f"{machine:.2f} s, {rate(machine_report, 'remote')}")
        dan = config(root, "dan", repo, f"volume:{volumes[2]}")
        container_cold, _ = builder(dan, "--torch", "main", "--no-smoke", "--jobs", str(jobs))
        host = host_build(repo, jobs, root)
        out["container / host"] = container_cold / host
        figure("container / host", container_cold / host, f"{container_cold:.2f} s / {host:.2f} s")
        # The host's own full-hit rebuild (a new clone, its ccache warm): what a rebuild costs
        # without builder; the teammate's rebuild less it is what builder itself adds.
        host_hit = host_build(repo, jobs, root, "host-src-2")
        out["host full-hit rebuild (s)"] = host_hit
        figure("host full-hit rebuild (s)", host_hit, "python -m build, same jobs, warm host ccache")
        out["builder's own fixed cost (s)"] = mate - host_hit
        figure("builder's own fixed cost (s)", mate - host_hit,
               f"teammate {mate:.2f} s less the host's {host_hit:.2f} s")
    finally:
        for volume in volumes:
            subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
    return out


def bytecode_like_an_install() -> None:
    """Let every Python this bench starts (builder, the host build) cache its bytecode, as a
    pip-installed builder has it (pip compiles at install): a machine whose environment sets
    PYTHONDONTWRITEBYTECODE (this one does) would otherwise make each builder run compile
    its ~85 modules again, 0.13 s of a 0.6 s no-op. The cache goes to a temporary dir of
    the bench's own (PYTHONPYCACHEPREFIX), not into the checkout."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        print("PYTHONDONTWRITEBYTECODE was set: unset for this bench (an installed builder has its bytecode)")
    prefix = Path(tempfile.mkdtemp(prefix="builder-bench-pyc-"))
    atexit.register(shutil.rmtree, prefix, True)
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    missing = prerequisites()
    if missing:
        sys.exit("bench/pipeline.py needs, before it starts: " + "; ".join(missing))
    bytecode_like_an_install()
    results: list[dict[str, float]] = []
    for number in range(1, rounds + 1):
        root = Path(tempfile.mkdtemp(prefix="builder-bench-"))
        print(f"round {number}/{rounds} (fixture faketorch; seconds measured in this run)", flush=True)
        # A Redis of the round's own: one left from an earlier round would make its cold build warm.
        port = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
                                 stdout=subprocess.DEVNULL)
        try:
            results.append(one_round(root, uuid.uuid4().hex[:8], f"redis://127.0.0.1:{port}"))
        finally:
            redis.terminate()
            redis.wait()
            if "--keep" not in sys.argv:
                shutil.rmtree(root, ignore_errors=True)
    print(f"median of {len(results)} round(s), spread min-max; goal", flush=True)
    for name in results[0]:
        values = [r[name] for r in results if name in r]
        median = statistics.median(values)
        goal = GOALS.get(name)
        verdict = ""
        if goal:
            limit, how = goal
            met = median < limit if how == "<" else median <= limit
            verdict = f"goal {how} {limit}: {'met' if met else 'NOT met'}"
        print(f"  {name:<28} {median:9.3f}  [{min(values):.3f} - {max(values):.3f}]  {verdict}", flush=True)


if __name__ == "__main__":
    main()
