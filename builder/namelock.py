"""A daemon-wide lock on an image name, so that looking at a name and tagging it are one step.

``docker tag`` moves a name whatever it held, and the Engine API has no compare-and-set on
names. Creating a container under a name the daemon already has does fail (409), so a
created, never started container whose name derives from the image name is a lock every
run on that daemon sees, whichever host, data dir or uid it runs from (as the daemon's
container names are what ``docker run --name`` relies on to refuse a second one).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import docker.errors
import requests

from builder.errors import BuildError, short_message

PREFIX = "builder-name-lock-"


def lock_name(reference: str) -> str:
    """The lock container's name for the image name ``reference``."""
    return PREFIX + hashlib.sha256(reference.encode()).hexdigest()[:24]


@contextlib.contextmanager
def name_lock(api: Any, reference: str, image: str, wait: float = 60.0, stale: float = 120.0) -> Iterator[None]:
    """Hold the lock on ``reference`` (``api``: a docker APIClient; ``image``: any local
    image to create the lock container from). A holder keeps it for one look and one tag;
    a lock left by a run that died is removed by the orphan reaper (its ``builder.pid``
    label) or, from another host, once older than ``stale`` seconds. Waiting more than
    ``wait`` seconds is a BuildError naming the container to remove."""
    name = lock_name(reference)
    labels = {"builder": "1", "builder.pid": str(os.getpid()), "builder.host": socket.gethostname(),
              "builder.name-lock": reference}
    deadline = time.monotonic() + wait
    clock = DaemonClock(api)
    while True:
        try:
            api.create_container(image, command=["true"], name=name, labels=labels, network_disabled=True)
            break
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise BuildError(f"the lock on the name {reference} could not be taken: {short_message(exc)}") from None
        if _age(api, name, clock) > stale:
            with contextlib.suppress(docker.errors.APIError):
                api.remove_container(name, force=True)
            continue
        if time.monotonic() > deadline:
            raise BuildError(f"the name {reference} stayed locked for {wait:g} s (container {name})",
                             f"if no other builder run is naming it, `docker rm {name}`")
        time.sleep(0.05)
    try:
        yield
    finally:
        with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
            api.remove_container(name, force=True)


class DaemonClock:
    """The daemon's time, asked once (``info`` is not a cheap call) and then carried on by
    this host's monotonic clock: over a wait of seconds the two do not drift apart, while a
    remote daemon's clock may be set far from this host's."""

    def __init__(self, api: Any, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._api, self._monotonic = api, monotonic
        self._start: tuple[datetime.datetime, float] | None = None

    def now(self) -> datetime.datetime:
        if self._start is None:
            self._start = (created_at(self._api.info()["SystemTime"]), self._monotonic())
        stamp, at = self._start
        return stamp + datetime.timedelta(seconds=self._monotonic() - at)


def _age(api: Any, name: str, clock: DaemonClock) -> float:
    """Seconds since the container ``name`` was created (0 if it went meanwhile), by the
    daemon's clock on both ends: a remote daemon's clock may be off from this host's."""
    try:
        created = api.inspect_container(name)["Created"]
    except docker.errors.NotFound:
        return 0.0
    return (clock.now() - created_at(created)).total_seconds()


def created_at(stamp: str) -> datetime.datetime:
    """A daemon time stamp (``Created``, ``SystemTime``: RFC 3339 with nanoseconds,
    ``...T23:30:12.123456789Z`` or with an offset, ``...12.1234+01:00``) as an aware
    datetime. Python 3.11's ``fromisoformat`` reads all of these (digits past the sixth are
    dropped); the pattern keeps anything else, which it might read as local time, out."""
    if re.fullmatch(r"[0-9-]+T[0-9:]+(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})", stamp) is None:
        raise BuildError(f"the Docker daemon gave a time stamp builder cannot read: {stamp!r}")
    return datetime.datetime.fromisoformat(stamp)
