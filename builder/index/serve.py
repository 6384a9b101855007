"""Serve the directory index over HTTP with pypiserver (for containers and other hosts).

file:// is enough on the build host; a container without the index mounted, or another
machine, needs HTTP. pypiserver already does this well, so builder only decides its
command line (a pure function, tested without a server) and supervises the process.

Two choices are deliberate:
- ``--disable-fallback``: pypiserver otherwise redirects unknown names to PyPI, and a
  public package could answer for a private name (dependency confusion).
- Without ``--auth`` the server is read-only: ``-a update`` with no password file makes
  pypiserver refuse every upload. (``-a . -P .``, which its help suggests for "no
  authentication", lets *anyone* upload.)
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import requests

from builder.errors import PackageIndexError, ValidationError

_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]*$|^\[[0-9A-Fa-f:.]+\]$")


@dataclass(frozen=True)
class ServeCommand:
    argv: list[str]
    url: str  # the --index-url to give pip: http://HOST:PORT/simple/
    health_url: str
    files_dir: Path


def server_command(root: Path | str, host: str = "127.0.0.1", port: int = 8080,
                   auth: Path | str | None = None, python: str = sys.executable) -> ServeCommand:
    """The pypiserver command line serving ``<root>/files`` (no I/O beyond checking paths)."""
    if not isinstance(host, str) or not _HOST.match(host):
        raise ValidationError(f"host {host!r} is not a valid host name or address")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValidationError(f"port {port!r} must be between 1 and 65535")
    files_dir = Path(root).expanduser().absolute() / "files"
    argv = [python, "-m", "pypiserver", "run", "-p", str(port), "-i", host.strip("[]"),
            "--disable-fallback", "--hash-algo", "sha256"]
    if auth is not None:
        auth_path = Path(auth).expanduser().absolute()
        if not auth_path.is_file():
            raise ValidationError(f"htpasswd file {auth_path} does not exist",
                                  "create it with passlib's HtpasswdFile or `htpasswd -cB`")
        argv += ["-P", str(auth_path), "-a", "update"]
    else:
        argv += ["-a", "update"]  # no -P: no user can authenticate, so nobody can upload
    argv.append(str(files_dir))
    url_host = f"[{host.strip('[]')}]" if ":" in host else host
    base = f"http://{url_host}:{port}"
    return ServeCommand(argv, f"{base}/simple/", f"{base}/health", files_dir)


class _Stop(Exception):
    """Raised from the SIGTERM handler so Ctrl-C and `kill` take the same clean path."""


def files_snapshot(files_dir: Path) -> frozenset[tuple[str, int, int]]:
    """(name, size, mtime) of each wheel: changes when an upload lands or is still growing."""
    try:
        return frozenset((p.name, st.st_size, st.st_mtime_ns) for p in files_dir.glob("*.whl")
                         if not p.name.startswith(".") and (st := p.stat()))
    except OSError:
        return frozenset()


def run_server(cmd: ServeCommand, on_ready: Callable[[str], None] | None = None,
               ready_timeout: float = 30.0, on_change: Callable[[], None] | None = None,
               poll: float = 0.5) -> int:
    """Start pypiserver, wait until it answers, run until it exits or we are interrupted.

    pypiserver writes uploads straight into ``files/`` and knows nothing of the
    directory index's pages; ``on_change`` (regenerate them under the index mutex) runs
    whenever the set of wheels there changes, so file:// users see what HTTP users see.

    Returns 0 after Ctrl-C/SIGTERM (the server was stopped on purpose), else the
    server's own exit code. The child gets its own process group so that Ctrl-C reaches
    only us and the shutdown is ours: terminate, wait, kill if it hangs.
    """
    cmd.files_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(cmd.argv, stdin=subprocess.DEVNULL, process_group=0)

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise _Stop

    in_main = threading.current_thread() is threading.main_thread()
    # SIGINT explicitly too: a shell starting us in the background sets it to "ignore".
    handlers = {signal.SIGTERM: on_term, signal.SIGINT: signal.default_int_handler}
    previous = {sig: signal.signal(sig, h) for sig, h in handlers.items()} if in_main else {}
    try:
        try:
            _wait_ready(proc, cmd, ready_timeout)
            if on_ready is not None:
                on_ready(cmd.url)
            if on_change is None:
                return proc.wait()
            seen = files_snapshot(cmd.files_dir)
            while (code := proc.poll()) is None:
                time.sleep(poll)
                now = files_snapshot(cmd.files_dir)
                if now != seen:
                    on_change()
                    seen = now
            return code
        except (KeyboardInterrupt, _Stop):
            _stop(proc)
            return 0
    finally:
        if proc.poll() is None:
            _stop(proc)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_ready(proc: subprocess.Popen[bytes], cmd: ServeCommand, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise PackageIndexError(f"pypiserver exited with code {code} before answering on {cmd.url}",
                                    "is the port already in use? see its messages above")
        try:
            if requests.get(cmd.health_url, timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise PackageIndexError(f"pypiserver did not answer on {cmd.health_url} within {timeout:.0f} s")


def _stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
