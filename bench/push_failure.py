"""How fast `builder push` gives up on a server that is down, next to a normal upload.

Usage: python bench/push_failure.py [--rounds 7] [--retries 2]

A refused connection must fail at once and be retried only as often as asked: nothing
waits out a connect timeout. Each round times push_wheel against a free port on
127.0.0.1 where nothing listens (``--retries`` retries, no backoff sleep), and a push
of a small wheel to a local pypiserver (one server for all rounds, a new wheel each
round). Prints per round, then the median of each with its spread (min-max) and the
ratio down / upload: far below 1 when refusals are not waited on. A timing, so it is
a benchmark, not a test (tests/integration/test_upload_servers.py checks the error, the
attempts and the sleeps asked for).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.push_vs_twine import PASSWORD, USER, FreshServer  # noqa: E402
from builder.errors import UploadError  # noqa: E402
from builder.index.upload import push_wheel  # noqa: E402
from tests.helpers_wheels import make_wheel  # noqa: E402


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/"  # closed again: nothing listens there


def time_down(wheel: Path, retries: int) -> float:
    start = time.perf_counter()
    try:
        push_wheel(wheel, dead_url(), USER, PASSWORD, retries=retries, backoff=0, sleep=lambda _: None)
    except UploadError as exc:
        if "connection refused" not in str(exc):
            raise
    else:
        raise RuntimeError("a push to a port where nothing listens succeeded")
    return time.perf_counter() - start


def time_upload(wheel: Path, url: str) -> float:
    start = time.perf_counter()
    result = push_wheel(wheel, url, USER, PASSWORD)
    elapsed = time.perf_counter() - start
    if result.status != "uploaded":
        raise RuntimeError(f"upload: {result}")
    return elapsed


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.1f} ms (min {min(values) * 1000:.1f}, " \
           f"max {max(values) * 1000:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--retries", type=int, default=2)
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import HtpasswdFile

    down: list[float] = []
    up: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-push-failure-") as tmp_name:
        tmp = Path(tmp_name)
        htpasswd = tmp / "htpasswd"
        users = HtpasswdFile(str(htpasswd), new=True)
        users.set_password(USER, PASSWORD)
        users.save()
        with FreshServer(tmp, htpasswd) as server:
            for n in range(args.rounds):
                wheel = make_wheel(tmp / "src", "Bench_Down", f"1.{n}", size=64 * 1024)
                down.append(time_down(wheel, args.retries))
                up.append(time_upload(wheel, server.url))
                print(f"round {n + 1}: down ({args.retries + 1} attempts) {down[-1] * 1000:.1f} ms, "
                      f"upload {up[-1] * 1000:.1f} ms", flush=True)
    print(f"server down, {args.retries + 1} attempts: {spread(down)}")
    print(f"upload to pypiserver:        {spread(up)}")
    print(f"ratio down / upload: {statistics.median(down) / statistics.median(up):.3f} "
          f"(per round: {min(d / u for d, u in zip(down, up, strict=True)):.3f}-"
          f"{max(d / u for d, u in zip(down, up, strict=True)):.3f})")


if __name__ == "__main__":
    main()
