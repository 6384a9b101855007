"""Time builder's push_wheel against `twine upload` for one large wheel on a local pypiserver.

Usage: python bench/push_vs_twine.py [--size-mb 200] [--rounds 3]

Each upload goes to a fresh pypiserver (its own empty package dir, 127.0.0.1, a free
port), so neither client ever finds the file already there. Both clients are timed end
to end as a user runs them: push_wheel includes its look-up before and its check after
the upload; twine includes its start-up and its hashing. The payload is random, so the
wheel does not compress. Prints the medians and the ratio twine / push_wheel.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builder.index.upload import push_wheel  # noqa: E402
from tests.helpers_wheels import make_wheel  # noqa: E402

USER, PASSWORD = "bench", "bench-password"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FreshServer:
    """A pypiserver with an empty package dir, for one upload."""

    def __init__(self, tmp: Path, htpasswd: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(dir=tmp))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(self.port),
             "--disable-fallback", "-P", str(htpasswd), "-a", "update", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self) -> FreshServer:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pypiserver exited with code {self.proc.returncode}")
            try:
                if requests.get(self.url + "health", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                time.sleep(0.1)
        raise RuntimeError("pypiserver did not start")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(15)
        for f in self.dir.iterdir():
            f.unlink()
        self.dir.rmdir()


def time_push(wheel: Path, url: str) -> float:
    start = time.perf_counter()
    result = push_wheel(wheel, url, USER, PASSWORD)
    elapsed = time.perf_counter() - start
    assert result.status == "uploaded", result
    return elapsed


def time_twine(wheel: Path, url: str) -> float:
    env = {**os.environ, "TWINE_USERNAME": USER, "TWINE_PASSWORD": PASSWORD}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "twine", "upload", "--repository-url", url,
                           "--non-interactive", "--disable-progress-bar", str(wheel)],
                          env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"twine failed:\n{done.stdout}\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import HtpasswdFile

    with tempfile.TemporaryDirectory(prefix="bench-push-") as tmp_name:
        tmp = Path(tmp_name)
        htpasswd = tmp / "htpasswd"
        users = HtpasswdFile(str(htpasswd), new=True)
        users.set_password(USER, PASSWORD)
        users.save()
        t0 = time.perf_counter()
        wheel = make_wheel(tmp / "src", "Bench_Big", "1.0", size=args.size_mb * 1024 * 1024)
        size = wheel.stat().st_size
        print(f"wheel: {wheel.name}, {size / 2**20:.1f} MiB (made in {time.perf_counter() - t0:.1f} s)")

        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        times: dict[str, list[float]] = {"push_wheel": [], "twine": []}
        for round_no in range(args.rounds):
            # Alternate who goes first so page-cache warmth does not favour one client.
            order = ["push_wheel", "twine"] if round_no % 2 == 0 else ["twine", "push_wheel"]
            for client in order:
                with FreshServer(tmp, htpasswd) as server:
                    fn = time_push if client == "push_wheel" else time_twine
                    times[client].append(fn(wheel, server.url))
            print(f"round {round_no + 1}: push_wheel {times['push_wheel'][-1]:.2f} s, "
                  f"twine {times['twine'][-1]:.2f} s")
        push_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        twine_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # includes the servers

    push_med = statistics.median(times["push_wheel"])
    twine_med = statistics.median(times["twine"])
    print(f"median push_wheel: {push_med:.2f} s ({size / 2**20 / push_med:.0f} MiB/s)")
    print(f"median twine:      {twine_med:.2f} s ({size / 2**20 / twine_med:.0f} MiB/s)")
    print(f"ratio twine / push_wheel: {twine_med / push_med:.2f}")
    print(f"peak RSS: this process {push_rss / 1024:.0f} MiB (was {rss_before / 1024:.0f} MiB before the "
          f"uploads); largest child (twine or a server) {twine_rss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
