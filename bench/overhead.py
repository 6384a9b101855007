#!/usr/bin/env python3
"""Container overhead, like with like: the same PEP 517 compile of the same checkout in
builder's deps image and on the host, and builder's fixed per-run cost beside it.

    python bench/overhead.py [--rounds N] [--keep]

Per round, alternating: (1) `builder wheels --torch main` cold (a fresh ccache volume and
a new PYTORCH_BUILD_VERSION, so the step really compiles), whole process; (2) the same
`python -m build --wheel --no-isolation -Cbuild-dir=build` in the deps image builder used,
run with `docker run` on the same checkout, with a fresh ccache dir; (3) the same command on
the host in a venv holding the same build requirements, fresh ccache dir. Then no-op
reruns. Printed: medians with the spread (min..max) and the ratios:
  compile overhead in the container = (2) / (3) - 1          (target < 5 %)
  builder's fixed per-run cost      = (1) - (2)              (target < 3 s: refs, mirror,
                                     stage look-ups, cache set-up containers, checkout, publish)
  no-op rerun                                                (target < 1 s)
Needs Docker (the fixture images are built on the first run) and gcc + ccache on the host
(apt-get install gcc g++ ccache: the image's versions on Debian bookworm); cmake and ninja
come from the venv. Not a test: it asserts nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from builder.examples import write_example_repo

HOST_CA = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
PEP517 = ["python", "-m", "build", "--wheel", "--no-isolation", "-Cbuild-dir=build"]


def timed(command: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, **kw)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:6])} ... failed:\n{done.stderr[-3000:]}")
    return seconds, done


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} s ({min(values):.2f}..{max(values):.2f}, n={len(values)})"


def build_env(recorded: dict[str, str], jobs: int, ccache_dir: str) -> dict[str, str]:
    """The env builder's step ran with (from the wheel's manifest), jobs and a fresh cache."""
    return {**recorded, "MAX_JOBS": str(jobs), "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs),
            "CCACHE_DIR": ccache_dir, "CCACHE_NOHASHDIR": "1"}


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    root = Path(tempfile.mkdtemp(prefix="builder-bench-overhead-"))
    tag = uuid.uuid4().hex[:8]
    volumes: list[str] = []
    try:
        repo = write_example_repo("faketorch", root / "repos" / "faketorch", heavy=True)  # 1.4 s a unit, as real
        cfg = root / "builder.toml"
        cfg.write_text(f'data_dir = "{root / "data"}"\n[ca]\nextra_certificates = "{HOST_CA}"\n'
                       f'[repos]\ntorch = "file://{repo}"\n')
        base = [sys.executable, "-m", "builder", "--config", str(cfg), "wheels", "--torch", "main", "--no-smoke",
                "--json"]
        # a first build: images, the deps layer, the checkout builder compiles in
        _, done = timed([*base, "--ccache", f"volume:builder-bench-oh-{tag}-warmup"])
        volumes.append(f"builder-bench-oh-{tag}-warmup")
        report = json.loads(done.stdout)
        jobs = report["jobs"]
        deps = next(s for s in report["stages"] if s["name"] == "deps")["tag"]
        manifest = json.loads((root / "data" / "index" / "files" /
                               f"{report['wheels'][0]['filename']}.manifest.json").read_text())
        recorded = {k: v for k, v in manifest["predicate"]["buildDefinition"]["internalParameters"]["env"].items()
                    if k not in ("PYTORCH_BUILD_VERSION", "PYTORCH_BUILD_NUMBER")}
        tree = root / "data" / "src" / "torch"
        host_tree = root / "host-src"
        shutil.copytree(tree, host_tree, symlinks=True, ignore=shutil.ignore_patterns("build"))
        venv = root / "host-venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "setuptools==80.9.0", "wheel==0.45.1",
                        "packaging==25.0", "build==1.6.1", "-r", str(host_tree / "requirements-build.txt")],
                       check=True)
        builder_runs, container_runs, host_runs, noop_runs = [], [], [], []
        for i in range(rounds):
            volume = f"builder-bench-oh-{tag}-{i}"
            volumes.append(volume)
            seconds, _ = timed([*base, "--ccache", f"volume:{volume}", "--torch-version", f"2.99.0a{i + 1}"])
            builder_runs.append(seconds)
            env = build_env(recorded, jobs, "/tmp/ccache")
            args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
            seconds, _ = timed(["docker", "run", "--rm", "--network", "none", "-v", f"{tree}:/src/torch",
                                "-w", "/src/torch", *args, deps, "sh", "-c",
                                f"rm -rf build && {' '.join(PEP517)} --outdir /tmp/dist"])
            container_runs.append(seconds)
            shutil.rmtree(host_tree / "build", ignore_errors=True)
            host_cc = root / f"host-ccache-{i}"
            env = {**os.environ, **build_env(recorded, jobs, str(host_cc)), "CCACHE_BASEDIR": str(host_tree),
                   "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}"}
            seconds, _ = timed([str(venv / "bin" / "python"), *PEP517[1:], "--outdir", str(root / "host-dist")],
                               cwd=host_tree, env=env)
            host_runs.append(seconds)
        for _ in range(max(3, rounds)):
            seconds, _ = timed([*base, "--ccache", f"volume:{volumes[-1]}", "--torch-version",
                                f"2.99.0a{rounds}"])
            noop_runs.append(seconds)
        container, host, whole = (statistics.median(x) for x in (container_runs, host_runs, builder_runs))
        print(f"faketorch, {jobs} jobs, {rounds} alternating rounds; medians (min..max)")
        print(f"  builder wheels, cold compile : {spread(builder_runs)}")
        print(f"  same compile, container      : {spread(container_runs)}")
        print(f"  same compile, host           : {spread(host_runs)}")
        print(f"  no-op rerun                  : {spread(noop_runs)}   (target < 1 s)")
        print(f"compile overhead in the container: {container:.2f} / {host:.2f} = {container / host:.3f} "
              f"({(container / host - 1) * 100:+.1f} %, target < 5 %)")
        print(f"builder's fixed per-run cost     : {whole:.2f} - {container:.2f} = {whole - container:.2f} s "
              "(target < 3 s)")
    finally:
        for volume in volumes:
            subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
        if "--keep" not in sys.argv:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
