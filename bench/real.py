#!/usr/bin/env python3
"""A real extension, built by builder and on the host, in one run (make bench-real).

    python bench/real.py [--rounds N] [--keep]      (default 2 rounds)

The package is torch-spline-conv 1.2.2 from its PyPI sdist (5 C++ translation units,
setuptools + torch.utils.cpp_extension, about 4 minutes cold on 2 cores) against the CPU
torch 2.13.0 wheel in pip's find-links dir: a real extension whose compiles dominate, yet
small enough for two rounds in one sitting. (torch-cluster has 16 units, about 11 minutes
cold: too long for rounds.)

Per round, with the same jobs on both sides:
  (a) builder cold (fresh data dir, empty ccache volume) vs host `pip wheel
      --no-build-isolation` from the same sdist with an empty host ccache in front of the
      compilers (ccache on a miss costs about what it costs builder): the container overhead;
  (b) builder warm (another fresh data dir, the same volume) vs host pip with that host
      ccache warm (another build dir; CCACHE_BASEDIR + NOHASHDIR so its paths do not matter):
      builder's warm ratio;
  (c) the fixed cost of (b)'s full-hit rebuild, by phase (``builder wheels --json``).
Before the rounds, one untimed builder run makes what the host venv stands for on
builder's side (stage images, the deps layer, the installed layers with torch), on a
ccache volume of its own. Each figure is printed as measured; the medians with their spread (min-max) at the end,
against the goals (a) <= 1.05, (b) <= 1.2. Needs Docker, ccache and the torch wheel (checked
first) and PyPI (the sdist, setuptools). Not a test: it asserts nothing.
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

SDIST, VERSION = "torch-spline-conv", "1.2.2"
HOST_CA = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
PACKAGE = f'''
[packages.spline]
sdist = "{SDIST}"
env = {{ FORCE_ONLY_CPU = "1" }}
build_requires = ["setuptools", "wheel"]
import_name = "torch_spline_conv"
'''
GOALS = {"(a) cold: builder / host": 1.05, "(b) warm: builder / host": 1.2}


def torch_wheel() -> Path | None:
    folders = [Path(p) for p in os.environ.get("PIP_FIND_LINKS", "").split() if Path(p).is_dir()]
    found = sorted(w for f in folders for w in f.glob("torch-2.13.0*-cp311-cp311-*linux*x86_64.whl"))
    return found[0] if found else None


def prerequisites() -> list[str]:
    missing = [] if shutil.which("ccache") else ["ccache (apt-get install -y ccache)"]
    if torch_wheel() is None:
        missing.append("a torch 2.13.0 cp311 Linux wheel in a $PIP_FIND_LINKS dir")
    if sys.version_info[:2] != (3, 11):
        missing.append("Python 3.11 for the host build (the torch wheel is cp311)")
    answer = subprocess.run(["docker", "info"], capture_output=True, text=True)
    if answer.returncode != 0:
        missing.append("a Docker engine (sudo .ci/dockerd-up)")
    return missing


def figure(name: str, value: float, detail: str = "") -> None:
    print(f"  {name:<30} {value:9.3f}  {detail}", flush=True)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n{done.stdout[-1500:]}{done.stderr[-2500:]}")
    return done


def data_dir(root: Path, name: str, volume: str, base: str) -> Path:
    data = root / name
    data.mkdir(parents=True)
    cfg = data / "builder.toml"
    cfg.write_text(f'data_dir = "{data}"\n[base]\nimage = "{base}"\n[ca]\nextra_certificates = "{HOST_CA}"\n'
                   f'[cache]\nccache = "volume:{volume}"\n' + PACKAGE)
    run([sys.executable, "-m", "builder", "--config", str(cfg), "index", "add", str(torch_wheel())])
    return cfg


def builder_wheels(cfg: Path, jobs: int) -> tuple[float, dict]:
    started = time.monotonic()
    done = run([sys.executable, "-m", "builder", "--config", str(cfg), "wheels", "--torch", "2.13.0",
                "--pkg", f"spline={VERSION}", "--jobs", str(jobs), "--json"])
    return time.monotonic() - started, json.loads(done.stdout)


def step(report: dict) -> dict:
    return next(w for w in report["wheels"] if w["recipe"] == "spline")


def host_venv(root: Path) -> Path:
    """torch 2.13.0 (the same wheel builder indexes) and the build requirements, untimed."""
    venv = root / "host-venv"
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(venv / "bin" / "pip"), "install", "-q", str(torch_wheel()), "setuptools", "wheel"])
    return venv


def host_wheel(venv: Path, sdist: Path, work: Path, jobs: int, cache: Path) -> float:
    """`pip wheel --no-build-isolation` of the sdist with ccache masquerading the compilers
    (as builder's container does for a cpp_extension build), its cache in ``cache``."""
    links = work / "ccache-bin"
    links.mkdir(parents=True)
    for name in ("gcc", "g++", "cc", "c++"):
        (links / name).symlink_to(shutil.which("ccache"))
    env = {**os.environ, "PATH": f"{links}:{venv / 'bin'}:{os.environ['PATH']}", "MAX_JOBS": str(jobs),
           "FORCE_ONLY_CPU": "1", "CCACHE_DIR": str(cache), "CCACHE_BASEDIR": str(work), "CCACHE_NOHASHDIR": "1",
           "TMPDIR": str(work)}
    started = time.monotonic()
    run([str(venv / "bin" / "pip"), "wheel", "-q", "--no-build-isolation", "--no-deps", "--no-index",
         "-w", str(work / "dist"), str(sdist)], env=env, cwd=work)
    return time.monotonic() - started


def one_round(root: Path, base: str, venv: Path, sdist: Path, tag: str) -> dict[str, float]:
    volume = f"builder-bench-real-{tag}"
    jobs = os.cpu_count() or 1
    out: dict[str, float] = {}
    try:
        cold, cold_report = builder_wheels(data_dir(root, "cold", volume, base), jobs)
        host_cache = root / "host-ccache"
        host_cold = host_wheel(venv, sdist, root / "host-cold", jobs, host_cache)
        out["(a) cold: builder / host"] = cold / host_cold
        figure("(a) cold: builder / host", cold / host_cold,
               f"{cold:.1f} s (its spline step {step(cold_report)['seconds']:.1f} s) / {host_cold:.1f} s, {jobs} jobs")
        warm, warm_report = builder_wheels(data_dir(root, "warm", volume, base), jobs)
        host_warm = host_wheel(venv, sdist, root / "host-warm", jobs, host_cache)
        cc = step(warm_report).get("ccache") or {}
        out["(b) warm: builder / host"] = warm / host_warm
        figure("(b) warm: builder / host", warm / host_warm,
               f"{warm:.1f} s / {host_warm:.1f} s; builder's hits {cc.get('hit_rate', 0):.0%}")
        out["(c) warm rebuild (s)"] = warm
        print("    (c) phases: " + ", ".join(f"{k} {v:.2f}" for k, v in
                                            sorted(warm_report.get("phases", {}).items(), key=lambda i: -i[1])),
              flush=True)
        for name, seconds in warm_report.get("phases", {}).items():
            out[f"(c) {name} (s)"] = seconds
    finally:
        subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
    return out


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 2
    missing = prerequisites()
    if missing:
        sys.exit("bench/real.py needs, before it starts: " + "; ".join(missing))
    from builder.config import load_config  # the configured base image, as the user's builder would use

    base = load_config(None).base.image
    top = Path(tempfile.mkdtemp(prefix="builder-bench-real-"))
    results: list[dict[str, float]] = []
    try:
        venv = host_venv(top)
        run([str(venv / "bin" / "pip"), "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(top),
             f"{SDIST}=={VERSION}"])
        sdist = next(top.glob("torch*spline*conv*.tar.gz"))
        # Untimed, as the host venv with torch is: the stage images, the deps layer and the
        # installed layers (torch in the build and smoke images) a first run makes, with a
        # ccache volume of its own that is removed after.
        print("environment: stage images and installed layers (untimed, as the host venv) ...", flush=True)
        volume = f"builder-bench-real-env-{uuid.uuid4().hex[:8]}"
        try:
            seconds, _ = builder_wheels(data_dir(top / "environment", "env", volume, base), os.cpu_count() or 1)
            print(f"  (made in {seconds:.1f} s, not counted)", flush=True)
        finally:
            subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
        for number in range(1, rounds + 1):
            print(f"round {number}/{rounds} ({SDIST} {VERSION} against torch 2.13.0 CPU; seconds measured now)",
                  flush=True)
            root = top / f"round-{number}"
            results.append(one_round(root, base, venv, sdist, uuid.uuid4().hex[:8]))
            if "--keep" not in sys.argv:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if "--keep" not in sys.argv:
            shutil.rmtree(top, ignore_errors=True)
    print(f"median of {len(results)} round(s), spread min-max; goal", flush=True)
    for name in results[0]:
        values = [r[name] for r in results if name in r]
        median = statistics.median(values)
        verdict = ""
        if name in GOALS:
            verdict = f"goal <= {GOALS[name]}: {'met' if median <= GOALS[name] else 'NOT met'}"
        print(f"  {name:<30} {median:9.3f}  [{min(values):.3f} - {max(values):.3f}]  {verdict}", flush=True)


if __name__ == "__main__":
    main()
