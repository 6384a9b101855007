"""A tiny stand-in for `bazel build`, enough for fakexla's _XLAC.

There is no usable Bazel here, so setup.py builds the C++ itself, but it
takes its options the way Bazel does, so that what builder's XLA recipe sets
(env for build_util.bazel_options_from_env, rc files for caches) is what
decides the build:

- rc files, in Bazel's order: /etc/bazel.bazelrc, %workspace%/.bazelrc
  (with its import / try-import lines), $HOME/.bazelrc; then the command line.
  `common` and `build` lines apply; `--config=NAME` expands in place to the
  `common:NAME` / `build:NAME` lines; the last value of a flag wins.
- -c/--compilation_mode, --copt, --cxxopt, --linkopt, --define, --jobs, -s.
- --disk_cache=DIR: a content-addressed cache in DIR (ac/ and cas/ with
  two-hex-digit subdirectories, like Bazel's; created if missing, as Bazel does).
- --remote_cache=http://...: the same entries over Bazel's HTTP cache protocol
  (GET/PUT URL/ac/KEY and URL/cas/HASH); grpc(s):// is refused.
  --remote_upload_local_results (default true) decides uploads.
- --remote_default_exec_properties is part of every action key, so the
  cache silo (SILO_NAME) separates cache entries, as intended upstream.

Action results are JSON, not Bazel's protobufs: the layout and the protocol
are Bazel's, the bytes are not.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_RC = Path("/etc/bazel.bazelrc")


class FakeBazelError(RuntimeError):
    pass


# ---------------------------------------------------------------- options


def read_rc(path: Path, workspace: Path, optional: bool = False) -> list[tuple[str, list[str]]]:
    """[(command[:config], args), ...] from one rc file, following imports."""
    if not path.is_file():
        if optional:
            return []
        raise FakeBazelError(f"rc file {path} not found")
    entries: list[tuple[str, list[str]]] = []
    for raw in path.read_text().splitlines():
        words = shlex.split(raw, comments=True)
        if not words:
            continue
        head, args = words[0], words[1:]
        if head in ("import", "try-import"):
            target = Path(args[0].replace("%workspace%", str(workspace)))
            entries += read_rc(target, workspace, optional=head == "try-import")
        else:
            entries.append((head, args))
    return entries


def rc_files(workspace: Path, home: str | None, system_rc: Path = SYSTEM_RC) -> list[Path]:
    files = [system_rc, workspace / ".bazelrc"]
    if home:
        files.append(Path(home) / ".bazelrc")
    return files


def _normalize(args: list[str]) -> list[str]:
    """Join two-word forms (-c opt, --config name) into --flag=value."""
    out: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-c", "--compilation_mode"):
            out.append(f"--compilation_mode={next(it)}")
        elif a == "--config":
            out.append(f"--config={next(it)}")
        else:
            out.append(a)
    return out


def expand_options(
    rc_entries: list[tuple[str, list[str]]], argv: list[str], command: str = "build"
) -> list[str]:
    """Effective option list: rc `common`/`build` lines, then argv; --config expanded in place."""
    by_section: dict[str, list[str]] = {}
    for head, args in rc_entries:
        by_section.setdefault(head, []).extend(_normalize(args))

    def expand(opts: list[str], seen: tuple[str, ...]) -> list[str]:
        out: list[str] = []
        for opt in opts:
            if opt.startswith("--config="):
                name = opt.split("=", 1)[1]
                if name in seen:
                    raise FakeBazelError(f"config {name!r} expands to itself")
                section = by_section.get(f"common:{name}", []) + by_section.get(f"{command}:{name}", [])
                if not section:
                    raise FakeBazelError(f"Config value '{name}' is not defined in any .rc file")
                out += expand(section, seen + (name,))
            else:
                out.append(opt)
        return out

    base = by_section.get("common", []) + by_section.get(command, [])
    return expand(base + _normalize(argv), ())


@dataclass
class Settings:
    compilation_mode: str = "fastbuild"
    jobs: int = os.cpu_count() or 1
    disk_cache: str = ""
    remote_cache: str = ""
    remote_upload_local_results: bool = True
    exec_properties: list[str] = field(default_factory=list)
    copts: list[str] = field(default_factory=list)
    cxxopts: list[str] = field(default_factory=list)
    linkopts: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    verbose: bool = False


def settings_from_options(options: list[str]) -> Settings:
    s = Settings()
    for opt in options:
        name, _, value = opt.partition("=")
        if opt == "-s":
            s.verbose = True
        elif name == "--compilation_mode":
            s.compilation_mode = value
        elif name == "--jobs":
            s.jobs = max(1, int(value))
        elif name == "--disk_cache":
            s.disk_cache = value
        elif name == "--remote_cache":
            s.remote_cache = value
        elif name in ("--remote_upload_local_results", "--noremote_upload_local_results"):
            s.remote_upload_local_results = name.startswith("--remote") and value.lower() not in (
                "false",
                "0",
            )
        elif name == "--remote_default_exec_properties":
            s.exec_properties.append(value)
        elif name in ("--copt", "--cxxopt", "--linkopt"):
            getattr(s, name[2:] + "s").append(value)
        elif name == "--define":
            key, _, val = value.partition("=")
            s.defines[key] = val
    return s


# ---------------------------------------------------------------- caches


class DiskCache:
    def __init__(self, root: str) -> None:
        self.root = Path(root)
        for kind in ("ac", "cas"):
            (self.root / kind).mkdir(parents=True, exist_ok=True)

    def _path(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def get(self, kind: str, key: str) -> bytes | None:
        p = self._path(kind, key)
        return p.read_bytes() if p.is_file() else None

    def put(self, kind: str, key: str, data: bytes) -> None:
        p = self._path(kind, key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f"{p.name}.tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(p)


class HttpCache:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def get(self, kind: str, key: str) -> bytes | None:
        try:
            with urllib.request.urlopen(f"{self.url}/{kind}/{key}", timeout=30) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise FakeBazelError(f"remote cache GET {kind}/{key}: HTTP {e.code}") from e

    def put(self, kind: str, key: str, data: bytes) -> None:
        req = urllib.request.Request(f"{self.url}/{kind}/{key}", data=data, method="PUT")
        try:
            with urllib.request.urlopen(req, timeout=60):
                pass
        except urllib.error.HTTPError as e:
            raise FakeBazelError(f"remote cache PUT {kind}/{key}: HTTP {e.code}") from e


# ---------------------------------------------------------------- actions


@dataclass
class Action:
    argv: list[str]
    inputs: list[Path]
    output: Path
    label: str


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Executor:
    def __init__(self, workspace: Path, settings: Settings, toolchain: str = "") -> None:
        self.workspace = workspace
        self.settings = settings
        self.toolchain = toolchain  # part of every key, like Bazel's toolchain inputs
        self.disk = DiskCache(settings.disk_cache) if settings.disk_cache else None
        self.remote = None
        if settings.remote_cache:
            if not settings.remote_cache.startswith(("http://", "https://")):
                raise FakeBazelError(
                    f"--remote_cache={settings.remote_cache}: this fake Bazel speaks only the HTTP cache "
                    "protocol (is --config=remote_cache, i.e. BAZEL_REMOTE_CACHE=1, pointing at upstream's "
                    "grpcs:// cache?)"
                )
            self.remote = HttpCache(settings.remote_cache)
        self.counts = {"disk cache hit": 0, "remote cache hit": 0, "local": 0}
        self._file_hashes: dict[Path, str] = {}

    def _hash_file(self, path: Path) -> str:
        if path not in self._file_hashes:
            self._file_hashes[path] = _sha256((self.workspace / path).read_bytes())
        return self._file_hashes[path]

    def action_key(self, action: Action) -> str:
        payload = {
            "argv": action.argv,
            "inputs": {str(p): self._hash_file(p) for p in sorted(action.inputs)},
            "exec_properties": sorted(self.settings.exec_properties),
            "toolchain": self.toolchain,
        }
        return _sha256(json.dumps(payload, sort_keys=True).encode())

    def _lookup(self, key: str) -> tuple[bytes, str] | None:
        for store, label in ((self.disk, "disk cache hit"), (self.remote, "remote cache hit")):
            if store is None:
                continue
            result = store.get("ac", key)
            if result is None:
                continue
            digest = json.loads(result)["output"]
            blob = store.get("cas", digest)
            if blob is not None and _sha256(blob) == digest:
                if store is self.remote and self.disk is not None:
                    self.disk.put("cas", digest, blob)
                    self.disk.put("ac", key, result)
                return blob, label
        return None

    def run(self, action: Action) -> str:
        key = self.action_key(action)
        out = self.workspace / action.output
        out.parent.mkdir(parents=True, exist_ok=True)
        hit = self._lookup(key)
        if hit is not None:
            out.write_bytes(hit[0])
            self.counts[hit[1]] += 1
            return hit[1]
        if self.settings.verbose:
            print("SUBCOMMAND:", shlex.join(action.argv), flush=True)
        proc = subprocess.run(action.argv, cwd=self.workspace, capture_output=True, text=True)
        if proc.returncode != 0:
            raise FakeBazelError(
                f"{action.label} failed:\n{shlex.join(action.argv)}\n{proc.stdout}{proc.stderr}"
            )
        blob = out.read_bytes()
        digest = _sha256(blob)
        result = json.dumps({"output": digest, "label": action.label}).encode()
        if self.disk is not None:
            self.disk.put("cas", digest, blob)
            self.disk.put("ac", key, result)
        if self.remote is not None and self.settings.remote_upload_local_results:
            self.remote.put("cas", digest, blob)
            self.remote.put("ac", key, result)
        self.counts["local"] += 1
        return "local"

    def run_all(self, actions: list[Action]) -> None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.settings.jobs) as pool:
            for fut in [pool.submit(self.run, a) for a in actions]:
                fut.result()
        for a in actions:  # later actions (links) hash what earlier ones produced
            self._file_hashes.pop(a.output, None)

    def summary(self) -> str:
        total = sum(self.counts.values())
        parts = ", ".join(f"{n} {what}" for what, n in self.counts.items() if n)
        return f"INFO: {total} processes: {parts or 'none'}."


def mode_flags(mode: str) -> list[str]:
    return {"opt": ["-O2", "-DNDEBUG"], "dbg": ["-O0", "-g"]}.get(mode, ["-O0"])


def link_external(workspace: Path, out_base: Path, name: str, target: str) -> Path:
    """Symlink an external directory into the output base, as Bazel's external/ does:
    compile commands then name it by a relative path, the same from any checkout."""
    link = out_base / "external" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)
    return link.relative_to(workspace)


def headers_under(workspace: Path, rel: Path) -> list[Path]:
    return sorted(p.relative_to(workspace) for p in (workspace / rel).rglob("*.h"))


def compiler() -> tuple[list[str], str]:
    """The C++ compiler command (CXX, default g++) and a string identifying it."""
    cxx = shlex.split(os.environ.get("CXX", "g++"))
    path = shutil.which(cxx[-1])
    if path is None:
        raise FakeBazelError(f"C++ compiler {cxx[-1]!r} not found")
    version = subprocess.run([*cxx, "--version"], capture_output=True, text=True).stdout.splitlines()
    return cxx, f"{os.path.realpath(path)} {version[0] if version else ''}"
