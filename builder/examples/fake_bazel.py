#!/usr/bin/env python3
"""A stand-in for a Bazel 7 release binary, enough for fakexla's ``_XLAC.so``.

No Bazel can be downloaded here, so builder's tests serve this file as
``<mirror>/7.4.1/bazel-7.4.1-linux-x86_64`` and the real bazelisk (pinned in
builder's xla deps layer, as pytorch/xla's CI installs it: .circleci/common.sh
runs ``npm install -g @bazel/bazelisk`` and links it as ``bazel``) downloads it
through ``BAZELISK_BASE_URL`` for the version in the workspace's
``.bazelversion``. What it reads is what real Bazel reads:

- the workspace: the nearest directory holding WORKSPACE (or MODULE.bazel);
  WORKSPACE's ``load(...)`` and ``new_local_repository(name, build_file, path)``
  (pytorch/xla's WORKSPACE takes torch from ``PYTORCH_LOCAL_DIR = "../"`` in
  bazel/dependencies.bzl); BUILD files with ``cc_binary``, ``cc_test``,
  ``cc_library`` (hdrs, strip_include_prefix), ``cc_import`` (shared_library),
  ``filegroup`` and ``glob`` -- a Python-compatible subset of Starlark. A
  declared input that does not exist fails the build as Bazel does
  ("missing input file"), so the torch checkout must hold what bazel/torch.BUILD
  names (torch/include, build/lib/libtorch_cpu.so, native_functions.yaml).
- rc files, in Bazel's order: /etc/bazel.bazelrc, %workspace%/.bazelrc
  (with its import / try-import lines), $HOME/.bazelrc; then the command line.
  `common` and `build` lines apply; `--config=NAME` expands in place to the
  `common:NAME` / `build:NAME` lines; the last value of a flag wins.
- -c/--compilation_mode, --copt, --cxxopt, --linkopt, --define, --jobs, -s,
  --symlink_prefix, --action_env=NAME=VALUE (CC picks the compiler, as Bazel's
  C++ toolchain autoconfiguration does; the process's own $CC/$CXX are not
  seen under --incompatible_strict_action_env, which pytorch/xla's .bazelrc sets).
- startup options, from `startup` rc lines and before the command
  (``bazel --output_user_root=DIR build ...``): --output_user_root (default
  $HOME/.cache/bazel/_bazel_$USER; Bazel fails without a user name: "$USER is
  not set", bazelbuild/bazel#16500) and --output_base (default
  <output_user_root>/<md5 of the workspace path>). One command at a time owns an
  output base: its ``lock`` file is taken (flock) for the whole build, and a second
  client waits as Bazel's does ("Another command is running ...").
- external repositories: WORKSPACE's ``http_archive(name, urls, sha256)``. One that
  the output base already holds (external/NAME with a marker matching its
  definition) is up to date; otherwise its archive comes from the repository cache
  (--repository_cache, default <output_user_root>/cache/repos/v1, entries at
  content_addressable/sha256/<sha256>/file, looked up only when the rule declares a
  sha256, as Bazel's cache is indexed by it) or is "downloaded": no network here, so
  the bytes are made from the URL (a declared sha256 must match them) and stored in
  the repository cache. Each build records which it was, and whether the output
  base was new or reused.
- --disk_cache=DIR: a content-addressed cache in DIR (ac/ and cas/ with
  two-hex-digit subdirectories, like Bazel's; created if missing, as Bazel does).
- --remote_cache=http://...: the same entries over Bazel's HTTP cache protocol
  (GET/PUT URL/ac/KEY and URL/cas/HASH); grpc(s):// is refused.
  --remote_upload_local_results (default true) decides uploads.
- --remote_default_exec_properties is part of every action key, so the
  cache silo (SILO_NAME) separates cache entries, as intended upstream.

Action results are JSON, not Bazel's protobufs: the layout and the protocol
are Bazel's, the bytes are not. The effective options are written beside the
outputs as ``bazel-bin/bazel_options.txt`` (fakexla's setup.py ships them).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
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
    repository_cache: str | None = None  # None: <output_user_root>/cache/repos/v1; "": off
    jobs: int = os.cpu_count() or 1
    disk_cache: str = ""
    remote_cache: str = ""
    remote_upload_local_results: bool = True
    exec_properties: list[str] = field(default_factory=list)
    copts: list[str] = field(default_factory=list)
    cxxopts: list[str] = field(default_factory=list)
    linkopts: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    action_env: dict[str, str] = field(default_factory=dict)
    strict_action_env: bool = False
    symlink_prefix: str = "bazel-"
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
        elif name == "--repository_cache":
            s.repository_cache = value
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
        elif name == "--action_env":
            key, eq, val = value.partition("=")
            s.action_env[key] = val if eq else os.environ.get(key, "")
        elif name in ("--incompatible_strict_action_env", "--noincompatible_strict_action_env"):
            s.strict_action_env = name.startswith("--incompatible") and value.lower() not in ("false", "0")
        elif name == "--symlink_prefix":
            s.symlink_prefix = value
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
        proc = subprocess.run(action.argv, cwd=self.workspace, capture_output=True, text=True,
                              env=action_env(self.settings))
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




def action_env(settings: Settings) -> dict[str, str]:
    """What an action sees: under --incompatible_strict_action_env a fixed PATH and the
    --action_env values only (Bazel's rule); otherwise the client's env plus them."""
    base = {"PATH": "/bin:/usr/bin:/usr/local/bin"} if settings.strict_action_env else dict(os.environ)
    return {**base, **settings.action_env}


# ---------------------------------------------------------------- workspace


def find_workspace(start: Path) -> Path:
    for d in (start, *start.parents):
        if (d / "WORKSPACE").is_file() or (d / "WORKSPACE.bazel").is_file() or (d / "MODULE.bazel").is_file():
            return d
    raise FakeBazelError("The 'build' command is only supported from within a workspace "
                         "(below a directory having a MODULE.bazel or WORKSPACE file).")


@dataclass
class Rule:
    kind: str
    name: str
    attrs: dict


class Package:
    """One BUILD file's rules, read by running it as Python with Starlark's names stubbed."""

    def __init__(self, root: Path, build_file: Path) -> None:
        self.root = root  # the directory globs and file labels are relative to
        self.rules: dict[str, Rule] = {}
        names = {k: self._rule(k) for k in ("cc_binary", "cc_test", "cc_library", "cc_import", "filegroup")}
        names.update(glob=self._glob, package=lambda **_: None, load=lambda *a, **k: None,
                     test_suite=lambda **_: None, exports_files=lambda *a, **k: None)
        exec(compile(build_file.read_text(), str(build_file), "exec"), {"__builtins__": {}, "True": True,
                                                                          "False": False, **names})

    def _rule(self, kind: str):
        def define(name: str, **attrs) -> None:
            self.rules[name] = Rule(kind, name, attrs)
        return define

    def _glob(self, include: list[str], exclude: list[str] | tuple = ()) -> list[str]:
        found = {str(p.relative_to(self.root)) for pattern in include for p in self.root.glob(pattern) if p.is_file()}
        dropped = {str(p.relative_to(self.root)) for pattern in exclude for p in self.root.glob(pattern)}
        return sorted(found - dropped)


@dataclass
class Repository:
    name: str
    path: Path  # absolute
    package: Package


@dataclass(frozen=True)
class Archive:
    """An ``http_archive`` of WORKSPACE: fetched into the output base's external/NAME."""

    name: str
    urls: tuple[str, ...]
    sha256: str = ""
    strip_prefix: str = ""


def load_archives(workspace: Path) -> list[Archive]:
    archives: list[Archive] = []

    def http_archive(name: str, urls: list[str] | None = None, url: str = "", sha256: str = "",
                     strip_prefix: str = "", **_) -> None:
        archives.append(Archive(name, tuple(urls or [url]), sha256, strip_prefix))

    load_workspace(workspace, http_archive)
    return archives


def load_workspace(workspace: Path, http_archive=None) -> dict[str, Repository]:
    """External repositories from WORKSPACE: ``new_local_repository`` entries, with
    ``load("//pkg:file.bzl", "SYMBOL")`` giving the constants they use."""
    repos: dict[str, Repository] = {}

    def load(label: str, *symbols: str) -> None:
        path = workspace / label.lstrip("/").replace(":", "/")
        if label.startswith("@") or not path.is_file():
            return  # another repository's macros: nothing this fake needs
        scope: dict = {"__builtins__": {}}
        exec(compile(path.read_text(), str(path), "exec"), scope)
        for symbol in symbols:
            frame_globals[symbol] = scope[symbol]

    def new_local_repository(name: str, path: str, build_file: str, **_) -> None:
        root = (workspace / path).resolve()
        if not root.is_dir():
            raise FakeBazelError(f"An error occurred during the fetch of repository '{name}': "
                                 f"The repository's path is \"{path}\" (absolute: \"{root}\") but it does not exist "
                                 "or is not a directory.")
        build = workspace / build_file.lstrip("/").replace(":", "/")
        repos[name] = Repository(name, root, Package(root, build))

    def ignore(*_a, **_k) -> None:
        return None

    frame_globals: dict = {"__builtins__": {}, "load": load, "new_local_repository": new_local_repository}
    for stub in ("workspace", "http_archive", "local_repository", "python_configure"):
        frame_globals[stub] = ignore
    if http_archive is not None:
        frame_globals["http_archive"] = http_archive
    path = workspace / "WORKSPACE"
    exec(compile(path.read_text(), str(path), "exec"), frame_globals)
    return repos


def split_label(label: str) -> tuple[str, str]:
    """'@torch//:headers' -> ('torch', 'headers'); '//:_XLAC.so' -> ('', '_XLAC.so')."""
    repo, _, rest = label.partition("//")
    return repo.lstrip("@"), rest.partition(":")[2]


# ---------------------------------------------------------------- build


class Build:
    """cc rules of the main repository, compiled and linked in an execroot under the
    output base, external repositories linked in as external/NAME (as Bazel does), so
    every command line names relative paths and cache keys match across checkouts."""

    def __init__(self, workspace: Path, settings: Settings, output_base: Path) -> None:
        self.workspace = workspace
        self.settings = settings
        self.repos = load_workspace(workspace)
        self.main = Package(workspace, workspace / "BUILD")
        self.execroot = output_base / "execroot" / "_main"
        self.bin = Path("bazel-out") / f"k8-{settings.compilation_mode}" / "bin"
        self._link_execroot()
        self.cc = shlex.split(settings.action_env.get("CC", "gcc"))
        if shutil.which(self.cc[0], path=action_env(settings).get("PATH")) is None:
            raise FakeBazelError(f"Auto-Configuration Error: Cannot find gcc or CC ({self.cc[0]})")
        version = subprocess.run([*self.cc, "--version"], capture_output=True, text=True,
                                 env=action_env(settings)).stdout.splitlines()
        self.toolchain = f"{self.cc[0]} {version[0] if version else ''}"
        self.executor = Executor(self.execroot, settings, self.toolchain)

    def _link_execroot(self) -> None:
        self.execroot.mkdir(parents=True, exist_ok=True)
        for entry in self.execroot.iterdir():
            if entry.is_symlink():
                entry.unlink()
        for entry in self.workspace.iterdir():
            if entry.name.startswith(("bazel-", ".")) or entry.name == "build":
                continue
            (self.execroot / entry.name).symlink_to(entry)
        external = self.execroot / "external"
        external.mkdir(exist_ok=True)
        for repo in self.repos.values():
            link = external / repo.name
            if link.is_symlink():
                link.unlink()
            link.symlink_to(repo.path)

    def _resolve(self, label: str) -> tuple[Rule, Path]:
        """The rule a label names and its directory relative to the execroot."""
        repo, name = split_label(label)
        if repo:
            if repo not in self.repos:
                raise FakeBazelError(f"no such package '@@{repo}//': The repository '@@{repo}' could not be resolved")
            package, where = self.repos[repo].package, Path("external") / repo
        else:
            package, where = self.main, Path(".")
        if name not in package.rules:
            raise FakeBazelError(f"no such target '{label}'")
        return package.rules[name], where

    def _inputs(self, label: str, where: Path, files: list[str]) -> list[Path]:
        paths = [where / f for f in files]
        for path in paths:
            if not (self.execroot / path).exists():
                raise FakeBazelError(f"missing input file '{label.split(':')[0]}:{path.relative_to(where)}'")
        return paths

    def deps(self, rule: Rule) -> tuple[list[str], list[Path], list[str], list[Path]]:
        """include flags, header inputs, link flags and link inputs of a rule's deps."""
        includes, headers, links, libs = [], [], [], []
        for dep in rule.attrs.get("deps", []) + rule.attrs.get("data", []):
            if dep == "@local_config_python//:python_headers":
                includes.append(f"-isystem{sysconfig_include()}")
                continue
            target, where = self._resolve(dep)
            if target.kind == "cc_library":
                hdrs = self._inputs(dep, where, target.attrs.get("hdrs", []))
                if not hdrs:
                    raise FakeBazelError(f"{dep}: no headers matched (is the torch checkout complete?)")
                headers += hdrs
                includes.append(f"-I{where / target.attrs.get('strip_include_prefix', '')}")
            elif target.kind == "cc_import":
                [lib] = self._inputs(dep, where, [target.attrs["shared_library"]])
                libs.append(lib)
                links += [f"-L{lib.parent}", f"-l:{lib.name}"]
            elif target.kind == "filegroup":
                headers += self._inputs(dep, where, target.attrs.get("srcs", []))
        return includes, headers, links, libs

    def objects(self, rule: Rule) -> list[Action]:
        includes, headers, _, _ = self.deps(rule)
        s = self.settings
        flags = ["-std=c++17", "-fPIC", "-I.", *includes, *mode_flags(s.compilation_mode), *rule.attrs.get("copts", []),
                 *s.copts, *s.cxxopts]
        own_headers = [Path(h) for h in rule.attrs.get("srcs", []) if h.endswith(".h")]
        actions = []
        for src in (Path(f) for f in rule.attrs.get("srcs", []) if f.endswith((".cc", ".cpp"))):
            obj = self.bin / "_objs" / rule.name / src.with_suffix(".o")
            actions.append(Action([*self.cc, *flags, "-c", str(src), "-o", str(obj)],
                                  [src, *own_headers, *headers], obj, f"Compiling {src}"))
        return actions

    def link(self, rule: Rule, objects: list[Path]) -> Action:
        _, _, links, libs = self.deps(rule)
        out = self.bin / rule.name
        shared = ["-shared"] if rule.attrs.get("linkshared") else []
        opts = [o.replace("$$", "$") for o in rule.attrs.get("linkopts", [])]
        return Action([*self.cc, *shared, "-o", str(out), *map(str, objects), *links, *opts, *self.settings.linkopts,
                       "-lstdc++", "-lm"], [*objects, *libs], out, f"Linking //:{rule.name}")

    def build(self, labels: list[str]) -> list[Path]:
        rules = [self._resolve(label)[0] for label in labels]
        compiles = {a.output: a for rule in rules for a in self.objects(rule)}
        self.executor.run_all(list(compiles.values()))
        links = [self.link(rule, [a.output for a in self.objects(rule)]) for rule in rules]
        self.executor.run_all(links)
        return [a.output for a in links]


def sysconfig_include() -> str:
    import sysconfig

    return sysconfig.get_paths()["include"]


def user_name() -> str:
    """Bazel's rule: $USER, else the passwd entry of the uid; neither is fatal."""
    import pwd

    if os.environ.get("USER"):
        return os.environ["USER"]
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        raise FakeBazelError("$USER is not set, and unable to look up name of current user: (error: 0): Success") \
            from None


def startup_options(rc_entries: list[tuple[str, list[str]]], argv: list[str]) -> dict[str, str]:
    """--output_user_root and --output_base from `startup` rc lines, then the command line's
    options before the command (the last one wins)."""
    out: dict[str, str] = {}
    for opt in [a for head, args in rc_entries if head == "startup" for a in args] + argv:
        name, eq, value = opt.partition("=")
        if name not in ("--output_user_root", "--output_base") or not eq:
            raise FakeBazelError(f"this fake Bazel takes only --output_user_root=DIR and --output_base=DIR "
                                 f"as startup options, not {opt!r}")
        out[name[2:]] = value
    return out


def output_user_root(startup: dict[str, str]) -> Path:
    name = user_name()  # Bazel asks for it whatever the options (bazelbuild/bazel#16500)
    if startup.get("output_user_root"):
        return Path(startup["output_user_root"])
    return Path(os.environ.get("HOME") or "/") / ".cache" / "bazel" / f"_bazel_{name}"


def output_base(workspace: Path, startup: dict[str, str] | None = None) -> Path:
    startup = startup or {}
    if startup.get("output_base"):
        return Path(startup["output_base"])
    return output_user_root(startup) / hashlib.md5(str(workspace).encode()).hexdigest()


def lock_output_base(base: Path):  # noqa: ANN201 - an open file holding the lock
    """Bazel's server lock: one command per output base; a second one waits."""
    import fcntl

    base.mkdir(parents=True, exist_ok=True)
    lock = open(base / "lock", "a+")  # noqa: SIM115 - held until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"Another command is running on {base}. Waiting for it to complete on the server...",
              file=sys.stderr, flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def simulated_download(url: str) -> bytes:
    """No network here: an archive's bytes, made from its URL (the same every time)."""
    return (f"fake archive of {url}\n" * 64).encode()


def fetch_archive(archive: Archive, base: Path, repository_cache: Path | None) -> str:
    """external/NAME in the output base: up to date there, from the repository cache, or downloaded."""
    external = base / "external"
    marker = external / f"@{archive.name}.marker"
    definition = _sha256(json.dumps([archive.name, archive.urls, archive.sha256, archive.strip_prefix]).encode())
    if marker.is_file() and marker.read_text() == definition and (external / archive.name).is_dir():
        return "up to date in the output base"
    blob, how = None, "downloaded"
    if archive.sha256 and repository_cache is not None:
        cached = repository_cache / "content_addressable" / "sha256" / archive.sha256 / "file"
        if cached.is_file():
            blob, how = cached.read_bytes(), "repository cache hit"
    if blob is None:
        blob = simulated_download(archive.urls[0])
        digest = _sha256(blob)
        if archive.sha256 and digest != archive.sha256:
            raise FakeBazelError(f"Error downloading {archive.urls[0]}: Checksum was {digest} but wanted "
                                 f"{archive.sha256}")
        if repository_cache is not None:  # every download is stored; only a declared sha256 finds it again
            entry = repository_cache / "content_addressable" / "sha256" / digest
            entry.mkdir(parents=True, exist_ok=True)
            tmp = entry / f"file.tmp{os.getpid()}"
            tmp.write_bytes(blob)
            tmp.replace(entry / "file")
    (external / archive.name).mkdir(parents=True, exist_ok=True)
    (external / archive.name / "ARCHIVE").write_bytes(blob)
    marker.write_text(definition)
    return how


def write_options(path: Path, argv: list[str], rcs: list[Path], options: list[str], workspace: Path,
                  toolchain: str, state: tuple[str, ...] | list[str] = ()) -> None:
    """'#' lines describe (startup options, output base, repository cache, external
    repositories), the others are the effective options (rc files, then the command line;
    --config expanded)."""
    home = os.environ.get("HOME", "")
    lines = ["# Written by the fake Bazel: what reached the build.", f"# command: bazel {shlex.join(argv)}",
             f"# compiler: {toolchain}", *(f"# {line}" for line in state)]
    for rc in rcs:
        shown = str(rc).replace(str(workspace), "%workspace%")
        if home and shown.startswith(home):
            shown = shown.replace(home, "~", 1)
        lines.append(f"# rc: {shown}{'' if rc.is_file() else ' (absent)'}")
    path.write_text("\n".join(lines + options) + "\n")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("version", "--version"):
        print("Build label: 7.4.1 (fake: builder's test stand-in)")
        return 0
    startup_argv = []
    while argv and argv[0].startswith("--"):  # startup options come before the command
        startup_argv.append(argv.pop(0))
    if not argv:
        print("ERROR: no command", file=sys.stderr)
        return 2
    if argv[0] in ("shutdown", "clean"):
        return 0
    if argv[0] != "build":
        print(f"ERROR: this fake Bazel runs only 'build', not {argv[0]!r}", file=sys.stderr)
        return 2
    try:
        workspace = find_workspace(Path.cwd())
        rcs = rc_files(workspace, os.environ.get("HOME"))
        entries = [e for rc in rcs for e in read_rc(rc, workspace, optional=True)]
        startup = startup_options(entries, startup_argv)
        targets = [a for a in argv[1:] if a.startswith(("//", "@"))]
        options = expand_options(entries, [a for a in argv[1:] if not a.startswith(("//", "@"))])
        settings = settings_from_options(options)
        if "xla_cuda" in settings.defines:
            raise FakeBazelError("--config=cuda requested, but this fixture has no CUDA")
        for line in options:
            print(f"INFO: option: {line}", file=sys.stderr, flush=True)
        state = [f"startup: --{k}={v}" for k, v in sorted(startup.items())]
        base = output_base(workspace, startup)
        lock = lock_output_base(base)  # noqa: F841 - held until this process ends
        count_file = base / "fake-bazel-builds"
        earlier = int(count_file.read_text()) if count_file.is_file() else 0
        state.append(f"output base: {base} ({f'reused after {earlier} builds' if earlier else 'new'})")
        repo_cache = (None if settings.repository_cache == "" else
                      Path(settings.repository_cache or output_user_root(startup) / "cache" / "repos" / "v1"))
        state.append(f"repository cache: {repo_cache or 'off'}")
        for archive in load_archives(workspace):
            state.append(f"external @{archive.name}: {fetch_archive(archive, base, repo_cache)}")
        for line in state:
            print(f"INFO: {line}", file=sys.stderr, flush=True)
        build = Build(workspace, settings, base)
        build.build(targets)
        count_file.write_text(str(earlier + 1))
        # the cache state (output base, fetches) goes to the log only: in the wheel it would
        # make the bytes depend on what the caches held, which real Bazel's outputs do not
        write_options(build.execroot / build.bin / "bazel_options.txt", argv, rcs, options, workspace, build.toolchain)
        link = Path(settings.symlink_prefix + "bin")
        if not link.is_absolute():
            link = workspace / link
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(build.execroot / build.bin)
        print(build.executor.summary(), file=sys.stderr, flush=True)
    except FakeBazelError as exc:
        print(f"ERROR: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
