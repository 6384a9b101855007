"""Bootstrap a base image from Debian packages, without any registry.

debootstrap (minbase, pinned suite, configurable mirror or snapshot) into a temp dir,
then ``docker import`` under the tag the config names. Skipped when that tag exists.
This is how tests and air-gapped users get a base image; a user with a registry names
a pinned image (``debian:bookworm@sha256:...``) instead, and the stages after it are
the same code either way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from builder.config import Config
from builder.engine import Engine
from builder.errors import BuildError, ConfigError
from builder.stages.plan import apt_url


@dataclass
class BootstrapResult:
    tag: str
    image_id: str
    created: bool
    seconds: float = 0.0


def split_tag(image: str) -> tuple[str, str]:
    if "@" in image:
        raise ConfigError(
            f"base.image {image!r} is a digest reference, which cannot be bootstrapped",
            "pull it from its registry, or name a local tag such as builder/debian:bookworm-minbase",
        )
    repository, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        return image, "latest"
    return repository, tag


def debootstrap_command(config: Config, target: Path) -> list[str]:
    return [
        "debootstrap", "--variant=minbase", "--components=main",
        config.base.suite, str(target), apt_url(config),
    ]


def import_changes(config: Config) -> list[str]:
    return [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        'CMD ["/bin/bash"]',
        f"LABEL org.opencontainers.image.title=builder-base builder.suite={config.base.suite} "
        f"builder.mirror={apt_url(config)}",
    ]


def bootstrap_base(engine: Engine, config: Config, log_path: Path, force: bool = False) -> BootstrapResult:
    import time

    tag = config.base.image
    repository, short_tag = split_tag(tag)
    existing = engine.image_id(tag)
    if existing and not force:
        return BootstrapResult(tag=tag, image_id=existing, created=False)
    if shutil.which("debootstrap") is None:
        raise BuildError("debootstrap is not installed", "apt-get install -y debootstrap")
    if os.geteuid() != 0:
        raise BuildError("builder base bootstrap must run as root (debootstrap needs it)",
                         "run it with sudo, or name a pinned registry image in base.image")
    started = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="builder-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        tarball = Path(tmp) / "rootfs.tar"
        with log_path.open("w") as log:
            command = debootstrap_command(config, rootfs)
            log.write("$ " + " ".join(command) + "\n")
            log.flush()
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
            if done.returncode != 0:
                raise BuildError(f"debootstrap of {config.base.suite} from {apt_url(config)} failed "
                                 f"(exit {done.returncode})", f"see the log {log_path}")
            # Package lists and caches are stale by the next build; drop them from the image.
            for sub in ("var/lib/apt/lists", "var/cache/apt/archives"):
                for entry in (rootfs / sub).glob("*"):
                    if entry.is_file():
                        entry.unlink()
            done = subprocess.run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."],
                                  stdout=log, stderr=subprocess.STDOUT, check=False)
            if done.returncode != 0:
                raise BuildError("packing the bootstrapped root filesystem failed", f"see the log {log_path}")
        image_id = engine.import_rootfs(tarball, repository, short_tag, import_changes(config))
    return BootstrapResult(tag=tag, image_id=image_id, created=True, seconds=time.monotonic() - started)
