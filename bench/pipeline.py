#!/usr/bin/env python3
"""Benchmarks of the fixture pipeline, printed as ratios measured in one run.

    python bench/pipeline.py [--keep]

(a) cold build vs no-op rerun; (b) one-file-change rebuild vs cold; (c) a second
teammate (other checkout path, other uid) with the shared cache vs cold; (d) a second
machine (empty local cache + Redis remote) vs cold; (e) the container build vs the same
PEP 517 build on the host with the same jobs (container overhead). Hit rates beside.
Needs Docker, redis-server, cmake and ninja on the host. Not a test: it asserts nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from builder.examples import commit_change, write_example_repo

HOST_CA = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"


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


def host_build(repo: Path, jobs: int, work: Path) -> float:
    """The same PEP 517 build on the host, same env, jobs and build requirements, with its
    own cold ccache."""
    tree = work / "host-src"
    subprocess.run(["git", "clone", "-q", "--recurse-submodules", "-c", "protocol.file.allow=always",
                    str(repo), str(tree)], check=True,
                   env={**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow",
                        "GIT_CONFIG_VALUE_0": "always"})
    env = {**os.environ, "MAX_JOBS": str(jobs), "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs), "USE_CUDA": "0",
           "BUILD_TEST": "0",
           "CMAKE_C_COMPILER_LAUNCHER": "ccache", "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
           "CCACHE_DIR": str(work / "host-ccache"), "CCACHE_BASEDIR": str(tree), "CCACHE_NOHASHDIR": "1"}
    # The python stage's and the commit's build requirements (the deps layer), in a venv of
    # their own (not in the timing); PATH puts its cmake and ninja first, as in the image.
    venv = work / "host-venv"
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


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="builder-bench-"))
    tag = uuid.uuid4().hex[:8]
    volumes = [f"builder-bench-{n}-{tag}" for n in ("shared", "fresh", "overhead")]
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
                             stdout=subprocess.DEVNULL)
    remote = f"redis://127.0.0.1:{port}"
    try:
        repo = write_example_repo("faketorch", root / "repos" / "faketorch")
        alice = config(root, "alice", repo, f"volume:{volumes[0]}")
        cold, cold_report = builder(alice, "--torch", "main", "--no-smoke", "--user", "1000:1000",
                                    "--ccache-remote", remote)
        jobs = cold_report["jobs"]
        noop, _ = builder(alice, "--torch", "main", "--no-smoke", "--user", "1000:1000", "--ccache-remote", remote)
        commit_change(repo, "csrc/kernels/kernel_000.cpp")
        one_file, one_report = builder(alice, "--torch", "main", "--no-smoke", "--user", "1000:1000")
        bob = config(root, "bob/other/path", repo, f"volume:{volumes[0]}")
        mate, mate_report = builder(bob, "--torch", "main", "--no-smoke", "--user", "1001:1000")
        carol = config(root, "carol", repo, f"volume:{volumes[1]}")
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "HEAD~1"], check=True)
        subprocess.run(["git", "-C", str(repo), "branch", "-q", "-f", "bench-first", "HEAD"], check=True)
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
        machine, machine_report = builder(carol, "--torch", "bench-first", "--no-smoke", "--ccache-remote", remote)
        dan = config(root, "dan", repo, f"volume:{volumes[2]}")
        container_cold, _ = builder(dan, "--torch", "main", "--no-smoke", "--jobs", str(jobs))
        host = host_build(repo, jobs, root)
        print(f"fixture pipeline (faketorch, {jobs} jobs); seconds measured in this run")
        print(f"(a) no-op rerun / cold           : {noop:7.2f} / {cold:7.2f} = {noop / cold:.3f}")
        print(f"(b) one-file change / cold       : {one_file:7.2f} / {cold:7.2f} = {one_file / cold:.3f}   "
              f"{rate(one_report)}")
        print(f"(c) teammate (path, uid) / cold  : {mate:7.2f} / {cold:7.2f} = {mate / cold:.3f}   {rate(mate_report)}")
        print(f"(d) 2nd machine + Redis / cold   : {machine:7.2f} / {cold:7.2f} = {machine / cold:.3f}   "
              f"{rate(machine_report, 'remote')}")
        print(f"(e) container cold / host cold   : {container_cold:7.2f} / {host:7.2f} = {container_cold / host:.3f}")
    finally:
        redis.terminate()
        for volume in volumes:
            subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
        if "--keep" not in sys.argv:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
