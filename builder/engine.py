"""The module that talks to Docker (docker SDK for Python; builder.namelock, its lock on
image names, is the only other).

Shaped after cibuildwheel's oci_container: a thin wrapper with a context-managed
container, so a container is removed on any error or Ctrl-C by structure. The SDK does
not speak BuildKit (docker-py#2230), so caches are named volumes, not RUN --mount.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import docker
import docker.errors
import requests

from builder.errors import BuildError, DockerUnavailable
from builder.errors import short_message as _short
from builder.files import pid_gone
from builder.namelock import name_lock

SCRATCH_LABEL = "builder.scratch-of"  # a volume for one run of this data dir (Engine.ensure_volume)


@dataclass
class BuildResult:
    image_id: str
    seconds: float
    log_path: Path


@dataclass
class RunResult:
    exit_code: int
    output: str
    seconds: float


@dataclass
class Mount:
    """A volume (``source`` a name) or a bind mount (``source`` an absolute host path)."""

    source: str
    target: str
    read_only: bool = False

    def as_docker(self) -> tuple[str, dict[str, str]]:
        return self.source, {"bind": self.target, "mode": "ro" if self.read_only else "rw"}


@dataclass
class ContainerSpec:
    image: str
    command: list[str]
    environment: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    workdir: str | None = None
    user: str | None = None
    network: str = "host"
    nano_cpus: int | None = None
    mem_limit: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


def _build_context(dockerfile: str, files: dict[str, bytes]) -> IO[bytes]:
    """A tar build context: the Dockerfile plus the copied files, with fixed metadata."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in sorted({"Dockerfile": dockerfile.encode(), **files}.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


class Engine:
    """Docker operations builder needs, with errors turned into BuilderErrors."""

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        if client is None:
            try:
                client = docker.from_env(timeout=600)
                client.ping()
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                raise DockerUnavailable(
                    f"cannot reach the Docker daemon ({_short(exc)})",
                    "start dockerd (e.g. `sudo dockerd --bridge=none --iptables=false &`) "
                    "or set DOCKER_HOST to a running engine",
                ) from None
        self.client = client
        self.api = client.api

    # -- images -------------------------------------------------------------------
    def image_id(self, ref: str) -> str | None:
        """The image ID of a tag or ID, or None when it is not present locally."""
        try:
            return self.api.inspect_image(ref)["Id"]
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            if exc.status_code == 404:
                return None
            raise BuildError(f"docker: cannot inspect image {ref}: {_short(exc)}") from None

    def image_labels(self, ref: str) -> dict[str, str]:
        try:
            return self.api.inspect_image(ref)["Config"].get("Labels") or {}
        except docker.errors.APIError:
            return {}

    def build(self, dockerfile: str, files: dict[str, bytes], tag: str, labels: dict[str, str],
              buildargs: dict[str, str], log_path: Path, network: str = "host", replace: bool = False) -> BuildResult:
        """Build with the classic builder, streaming the log to ``log_path``; the image is
        built untagged and then named ``tag`` by :meth:`claim_tag`: when another run built
        the same tag meanwhile, its image is the result (first writer wins). ``replace``
        (a forced rebuild) moves the tag to the new image whatever held it."""
        started = time.monotonic()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        context = _build_context(dockerfile, files)
        image_id = None
        last_lines: list[str] = []
        with log_path.open("w") as log:
            log.write(dockerfile + "\n---- build log ----\n")
            try:
                stream = self.api.build(
                    fileobj=context, custom_context=True, tag=None, labels=labels,
                    buildargs=buildargs, network_mode=network, rm=True, forcerm=True,
                    pull=False, decode=True,
                )
                for chunk in stream:
                    if "stream" in chunk:
                        text = chunk["stream"]
                        log.write(text)
                        last_lines = (last_lines + text.splitlines())[-30:]
                    if "aux" in chunk and "ID" in chunk["aux"]:
                        image_id = chunk["aux"]["ID"]
                    if "error" in chunk:
                        log.write("ERROR: " + chunk["error"] + "\n")
                        raise BuildError(
                            f"stage image {tag} failed to build: {chunk['error'].strip()}",
                            f"see the log {log_path}",
                        )
                    log.flush()
            except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
                raise BuildError(f"docker build of {tag} failed: {_short(exc)}",
                                 f"see the log {log_path}") from None
        if image_id is None:
            raise BuildError(f"docker build of {tag} produced no image", f"see the log {log_path}")
        if replace:
            self.tag(image_id, tag)
        else:
            image_id = self.claim_tag(image_id, tag)
        return BuildResult(image_id=image_id, seconds=time.monotonic() - started, log_path=log_path)

    def claim_tag(self, image_id: str, reference: str) -> str:
        """Name ``image_id`` ``reference`` unless an image already holds that name; returns
        the ID the name holds afterwards. Two runs building one stage at once (the same key)
        make two image IDs (a build's bytes are not reproducible); the stages above chain on
        the parent's ID, so a name that moved to the second would give every later run other
        keys than the first run's. First writer wins: the loser's image is removed. The look
        and the tag are one step under :meth:`name_lock` (``docker tag`` itself moves a name
        whatever it held, so two runs that both looked first would both tag)."""
        with self.name_lock(reference, image_id):
            held = self.image_id(reference)
            if held is None:
                self.tag(image_id, reference)
                held = image_id
        if held != image_id:
            with contextlib.suppress(docker.errors.APIError):  # e.g. a layer the winner's build reused
                self.api.remove_image(image_id, force=True)
        return held

    def name_lock(self, reference: str, image: str, wait: float = 60.0, stale: float = 120.0):
        """The daemon-wide lock on the name ``reference`` (builder.namelock)."""
        return name_lock(self.api, reference, image, wait=wait, stale=stale)

    def import_rootfs(self, tarball: Path, repository: str, tag: str, changes: list[str]) -> str:
        """``docker import`` a root filesystem tarball; returns the image ID."""
        try:
            with tarball.open("rb") as fh:
                result = self.api.import_image_from_data(fh.read(), repository=repository, tag=tag,
                                                         changes=changes)
        except docker.errors.APIError as exc:
            raise BuildError(f"docker import of {repository}:{tag} failed: {_short(exc)}") from None
        image_id = self.image_id(f"{repository}:{tag}")
        if image_id is None:
            raise BuildError(f"docker import of {repository}:{tag} gave no image: {result!r}")
        return image_id

    # -- registries --------------------------------------------------------------
    def tag(self, image: str, reference: str) -> None:
        repository, _, tag = reference.rpartition(":")
        if not self.api.tag(image, repository, tag):
            raise BuildError(f"docker tag {image} {reference} failed")

    def push(self, reference: str) -> None:
        """Push a tag. The SDK does not raise on a failed push: the error comes as a chunk."""
        repository, _, tag = reference.rpartition(":")
        try:
            for chunk in self.api.push(repository, tag=tag, stream=True, decode=True):
                if "error" in chunk:
                    raise BuildError(f"docker push {reference} failed: {chunk['error'].strip()}",
                                     "check the registry address and that it accepts pushes")
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            raise BuildError(f"docker push {reference} failed: {_short(exc)}") from None

    def pull_if_present(self, reference: str) -> str | None:
        """Pull ``reference`` when the registry has it; None when it does not (or is unreachable)."""
        try:
            self.client.images.get_registry_data(reference)
        except (docker.errors.NotFound, docker.errors.APIError, requests.exceptions.RequestException):
            return None
        repository, _, tag = reference.rpartition(":")
        try:
            self.api.pull(repository, tag=tag)
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            raise BuildError(f"docker pull {reference} failed: {_short(exc)}") from None
        return self.image_id(reference)

    def remove_image(self, ref: str) -> None:
        with contextlib.suppress(docker.errors.ImageNotFound):
            self.api.remove_image(ref, force=True)

    # -- containers ---------------------------------------------------------------
    @contextlib.contextmanager
    def container(self, spec: ContainerSpec) -> Iterator[Any]:
        """Create and start a container; it is removed on exit, whatever happened."""
        container = None
        try:
            container = self.client.containers.create(
                spec.image, spec.command, environment=spec.environment,
                volumes=dict(m.as_docker() for m in spec.mounts), working_dir=spec.workdir,
                user=spec.user or "", network_mode=spec.network, nano_cpus=spec.nano_cpus,
                mem_limit=spec.mem_limit, labels={"builder": "1", "builder.pid": str(os.getpid()),
                                                  "builder.host": socket.gethostname(), **spec.labels},
                privileged=False, detach=True,
            )
            container.start()
            yield container
        except docker.errors.ImageNotFound:
            raise BuildError(f"image {spec.image} not found", "run `builder images` first") from None
        except docker.errors.APIError as exc:
            raise BuildError(f"container from {spec.image} failed: {_short(exc)}") from None
        finally:
            if container is not None:
                with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
                    container.remove(force=True)

    def run(self, spec: ContainerSpec, log: IO[str] | None = None) -> RunResult:
        """Run a container to completion, streaming its output to ``log``."""
        started = time.monotonic()
        with self.container(spec) as container, _daemon_guard(spec.image):
            output = _follow(container, log)
            code = int(container.wait().get("StatusCode", 1))
            self._still_there(code)
        return RunResult(exit_code=code, output=output, seconds=time.monotonic() - started)

    def _still_there(self, exit_code: int) -> None:
        """A failed container whose daemon no longer answers was stopped by that daemon
        shutting down (dockerd closes its API, then stops every container): the error is
        the lost daemon (raised by _daemon_guard), not a failure of the step's own code."""
        if exit_code != 0:
            self.client.ping()

    def run_and_commit(self, spec: ContainerSpec, repository: str, tag: str, log: IO[str] | None = None,
                       labels: dict[str, str] | None = None) -> tuple[RunResult, str | None]:
        """Run a container; if it exits 0, commit its file system and name it
        ``repository:tag`` by :meth:`claim_tag` (e.g. a smoke image with heavy wheels
        installed once per key; two runs making it at once agree on the first). Returns the
        run result and the ID the name holds (None when the run failed)."""
        started = time.monotonic()
        with self.container(spec) as container, _daemon_guard(spec.image):
            output = _follow(container, log)
            code = int(container.wait().get("StatusCode", 1))
            self._still_there(code)
            image_id = None
            if code == 0:
                try:
                    image = container.commit(conf={"Labels": {"builder": "1", **(labels or {})}})
                except docker.errors.APIError as exc:
                    raise BuildError(f"docker commit of {repository}:{tag} failed: {_short(exc)}") from None
                image_id = self.claim_tag(image.id, f"{repository}:{tag}")
        return RunResult(code, output, time.monotonic() - started), image_id

    def reap_orphans(self, mine: Callable[[dict[str, str]], bool]) -> list[tuple[str, dict[str, str]]]:
        """Remove containers an earlier builder run on this host could not remove (the
        daemon went away mid-run, or the run was SIGKILLed): their process is gone. Only
        those whose labels ``mine`` accepts. Returns (name, labels) so the caller can remove
        what a label names (its work dir)."""
        reaped: list[tuple[str, dict[str, str]]] = []
        try:
            # ignore_removed: another run's container may go between the list and its inspect
            found = self.client.containers.list(all=True, ignore_removed=True, filters={"label": [
                "builder=1", f"builder.host={socket.gethostname()}"]})
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return reaped
        for container in found:
            if pid_gone(container.labels.get("builder.pid", "")) and mine(dict(container.labels)):
                with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
                    container.remove(force=True)
                    reaped.append((container.name, dict(container.labels)))
        return reaped

    def containers_with_label(self, label: str) -> list[Any]:
        """The containers with ``label`` (``key`` or ``key=value``) now; one removed while
        listing (another run's ended) is left out, not an error."""
        return self.client.containers.list(all=True, ignore_removed=True, filters={"label": label})

    # -- volumes -------------------------------------------------------------------
    def ensure_volume(self, name: str, scratch_of: str = "") -> None:
        """Create the volume ``name`` if it does not exist. A scratch volume lives for one
        run only (a verify's empty caches; ``scratch_of``: the data dir it belongs to): it
        is labelled with that dir and this host and pid, so that the next run of that data
        dir removes it by :meth:`reap_volumes` once this process is gone, if it could not."""
        try:
            self.client.volumes.get(name)
        except docker.errors.NotFound:
            owner = {SCRATCH_LABEL: scratch_of, "builder.pid": str(os.getpid()),
                     "builder.host": socket.gethostname()} if scratch_of else {}
            self.client.volumes.create(name, labels={"builder": "1", **owner})

    def reap_volumes(self, scratch_of: str) -> list[str]:
        """Remove the scratch volumes of the data dir ``scratch_of`` whose run on this host
        is gone (SIGKILLed before removing them); the caches are not scratch volumes.
        Returns their names."""
        removed: list[str] = []
        try:
            found = self.client.volumes.list(filters={"label": [
                "builder=1", f"builder.host={socket.gethostname()}", f"{SCRATCH_LABEL}={scratch_of}"]})
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return removed
        for volume in found:
            if pid_gone((volume.attrs.get("Labels") or {}).get("builder.pid", "")):
                with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
                    volume.remove(force=True)
                    removed.append(volume.name)
        return removed

    def volume_exists(self, name: str) -> bool:
        try:
            self.client.volumes.get(name)
        except docker.errors.NotFound:
            return False
        return True

    def remove_volume(self, name: str) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self.client.volumes.get(name).remove(force=True)



def _follow(container: Any, log: IO[str] | None) -> str:
    """Stream a container's output into ``log`` as it comes; return all of it."""
    chunks: list[str] = []
    for raw in container.logs(stream=True, follow=True):
        text = raw.decode("utf-8", "replace")
        chunks.append(text)
        if log is not None:
            log.write(text)
            log.flush()
    return "".join(chunks)


@contextlib.contextmanager
def _daemon_guard(image: str) -> Iterator[None]:
    """A daemon that stops or restarts mid-run breaks the connection: one clear error."""
    try:
        yield
    except requests.exceptions.RequestException as exc:
        raise BuildError(f"lost the Docker daemon while running a container from {image} ({_short(exc)})",
                         "check that dockerd is running, then rerun: stages already built are reused") from None
    except docker.errors.APIError as exc:
        raise BuildError(f"Docker failed while running a container from {image}: {_short(exc)}") from None


def labels_json(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))
