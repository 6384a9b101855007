"""The caches a build step mounts, made ready before it runs: the shared ccache (volume or
host dir, its config written once for the team), the Bazel cache, the build user's
access; and the guards around a step (free disk, one run per package at a time)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from builder.caches.ccache import CCACHE_MOUNT, CacheLocation, CacheStats, config_text, parse_location, read_only_env
from builder.config import Config
from builder.console import Note
from builder.engine import ContainerSpec, Engine, Mount
from builder.errors import BuildError
from builder.files import atomic_write
from builder.mounts import BAZEL_CACHE_MOUNT
from builder.resources import free_disk_gib


@dataclass(frozen=True)
class StepMounts:
    """What a wheel step mounts for its caches."""

    ccache: str  # volume name or host path
    bazel: str  # volume name or host path; "" for a build without Bazel (nothing mounted)
    index_root: Path
    ccache_read_only: bool = False
    ccache_env: dict[str, str] = field(default_factory=dict)


def ccache_version(engine: Engine, image: str, remote: str) -> str:
    """The ccache version in the image (the remote storage key was renamed in 4.7)."""
    result = engine.run(ContainerSpec(image=image, command=["ccache", "--version"], network="none"))
    match = re.search(r"ccache version ([0-9.]+)", result.output)
    if not match:
        raise BuildError(f"cannot read the ccache version in {image}: {result.output.strip()[:200]}")
    for url in remote.split():  # ccache takes several remote storages, space separated
        feature = url.split(":", 1)[0] + "-storage"
        if feature not in result.output.split():
            raise BuildError(f"ccache {match.group(1)} in {image} lacks {feature} for {url}")
    return match.group(1)


def prepare_ccache(engine: Engine, cfg: Config, image: str, index_root: Path, bazel: str) -> StepMounts:
    """Create the cache (volume or dir), check the build user can write it, and write its
    shared config; a read-only cache gets the same settings as environment instead."""
    location = ensure_location(engine, parse_location(cfg.cache.ccache, "cache.ccache"))
    compiler_check = f"string:gcc-12={cfg.toolchain.gcc},clang-14={cfg.toolchain.clang}"
    if cfg.cache.ccache_read_only:
        return StepMounts(location.docker_source, bazel, index_root, True, read_only_env(compiler_check))
    version = ccache_version(engine, image, cfg.cache.ccache_remote) if cfg.cache.ccache_remote else ""
    text = config_text(cfg.cache.ccache_max_size, compiler_check, cfg.cache.ccache_remote, version or "4.7")
    user = build_user(cfg)
    # A host dir belongs to its owner: builder only checks that the build user may write it.
    group = user.partition(":")[2] if user else ""
    # A volume belongs to builder: give it (and anything an earlier user left) to the build
    # group, setgid and group-writable, so teammates with other uids but one gid share it.
    share = f"chmod 2777 {CCACHE_MOUNT} && "
    if group:
        share += (f"find {CCACHE_MOUNT} ! -group {group} -exec chgrp {group} {{}} + && "
                  f"find {CCACHE_MOUNT} -mindepth 1 -type d ! -perm -2070 -exec chmod g+rwxs {{}} + && ")
    prepare = (share if location.kind == "volume" else "") + (
        f'test -w {CCACHE_MOUNT} -a -x {CCACHE_MOUNT} || {{ echo "not writable"; exit 3; }}; '
        f'printf %s "$CONF" > {CCACHE_MOUNT}/ccache.conf.tmp.$$ && mv {CCACHE_MOUNT}/ccache.conf.tmp.$$ '
        f"{CCACHE_MOUNT}/ccache.conf && chmod 0664 {CCACHE_MOUNT}/ccache.conf")
    result = engine.run(ContainerSpec(image=image, command=["sh", "-c", prepare], environment={"CONF": text},
                                      mounts=[Mount(location.docker_source, CCACHE_MOUNT)], network="none",
                                      user="0:0" if location.kind == "volume" else user))
    if result.exit_code == 3 or (result.exit_code != 0 and "ermission denied" in result.output):
        raise BuildError(f"the ccache at {location.describe()} is not writable by the build user {user or 'root'}",
                         "make it group-writable for the team (chmod 2775 and a shared gid), "
                         "or set [cache] ccache_read_only = true to use it without writing")
    if result.exit_code != 0:
        raise BuildError(f"cannot write the ccache config into {location.describe()}: {result.output.strip()}")
    return StepMounts(location.docker_source, bazel, index_root)


def build_user(cfg: Config) -> str | None:
    """uid:gid of build containers: the config's, else the invoking user's (root stays root)."""
    if cfg.build.user:
        return cfg.build.user
    return None if os.geteuid() == 0 else f"{os.geteuid()}:{os.getegid()}"


def ensure_location(engine: Engine, location: CacheLocation) -> CacheLocation:
    """Create a cache's named volume or host directory if it does not exist yet."""
    if location.kind == "volume":
        engine.ensure_volume(location.value)
    else:
        Path(location.value).mkdir(parents=True, exist_ok=True)
    return location


def prepare_bazel_cache(engine: Engine, cfg: Config, image: str = "", dirs: tuple[str, ...] = (),
                        user_dirs: tuple[str, ...] = ()) -> str:
    """The Bazel cache location; with ``image``, the recipe's ``dirs`` in it (disk cache,
    bazelisk downloads, repository cache) made in a volume (by root), everything in it
    writable for any build uid (as the ccache volume is for the build group): only entries
    not yet so are changed, so a warm cache costs a walk.
    ``user_dirs`` (output user roots: one tree per uid, large, owned by that uid) are made
    sticky and world-writable and left out of the walk."""
    location = ensure_location(engine, parse_location(cfg.cache.bazel, "cache.bazel"))
    if image and location.kind == "volume":
        share = bazel_share_script(dirs, user_dirs)
        result = engine.run(ContainerSpec(image=image, command=["sh", "-c", share],
                                          mounts=[Mount(location.docker_source, BAZEL_CACHE_MOUNT)], network="none",
                                          user="0:0"))
        if result.exit_code != 0:
            raise BuildError(f"cannot prepare the Bazel cache {location.describe()}: {result.output.strip()}")
    return location.docker_source


def bazel_share_script(dirs: tuple[str, ...], user_dirs: tuple[str, ...]) -> str:
    """The root shell line that readies the Bazel volume (pure: unit tested): what an earlier
    build (another uid) left made readable and writable for the next one, except the
    per-uid output user roots, which are only made (sticky, world-writable)."""
    made = " ".join((BAZEL_CACHE_MOUNT, *dirs, *user_dirs))
    sticky = f" && chmod 1777 {' '.join(user_dirs)}" if user_dirs else ""
    pruned = "".join(f"-path {d} -prune -o " for d in user_dirs)
    walk = f"find {BAZEL_CACHE_MOUNT} {pruned}! -type l ! -perm -0666 -exec chmod a+rwX {{}} +"
    return f"mkdir -p {made}{sticky} && {walk}"


def give_tree_to(path: Path, user: str) -> None:
    uid, _, gid = user.partition(":")
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), int(uid), int(gid or uid))
    os.lchown(path, int(uid), int(gid or uid))


def record_last_build(cfg: Config, recipe: str, wheel: str, stats: CacheStats | None) -> None:
    """The cache's last-build figures, for `builder cache stats`."""
    if stats is None:
        return
    record = {"cache": cfg.cache.ccache, "recipe": recipe, "wheel": wheel,
              "finished": time.time(), **stats.as_dict()}
    atomic_write(Path(cfg.data_dir) / "cache-last.json", json.dumps(record))


def check_disk(path: Path, need_gib: float) -> None:
    free = free_disk_gib(path)
    if free < need_gib:
        raise BuildError(f"only {free:.1f} GiB free in {path}, the build needs {need_gib:.1f} GiB",
                         "free some space, or lower [build] min_free_disk_gib if the build is small")


@contextlib.contextmanager
def one_run_per_package(cfg: Config, name: str, note: Note) -> Iterator[None]:
    """One builder run at a time per package and data dir (mirror, work tree, build):
    a second run waits here, then finds the wheel the first one published."""
    path = Path(cfg.data_dir) / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    mutex = FileLock(str(path))
    try:
        mutex.acquire(timeout=0)
    except Timeout:
        note(f"{name}: another builder run holds {path}; waiting for it ...")
        mutex.acquire()
    try:
        yield
    finally:
        mutex.release()
