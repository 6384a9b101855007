"""The pure parts of builder.namelock: the lock container's name and the daemon's time stamps."""

from __future__ import annotations

import datetime

from builder.namelock import PREFIX, created_at, lock_name


def test_the_lock_name_is_one_per_image_name_and_a_valid_container_name():
    a, b = lock_name("builder/toolchain:abc"), lock_name("builder/toolchain:abd")
    assert a != b and a == lock_name("builder/toolchain:abc")
    assert a == PREFIX + "893a24f12759ffbd16b40f45" == "builder-name-lock-893a24f12759ffbd16b40f45"


def test_a_stamp_with_nanoseconds_is_read_to_the_microsecond_in_utc():
    assert created_at("2026-12-07T23:30:12.123456789Z") == datetime.datetime(
        2026, 12, 7, 23, 30, 12, 123456, tzinfo=datetime.UTC)


def test_a_stamp_with_fewer_digits_or_none_is_read_too():
    assert created_at("2026-12-07T23:30:12.5Z") == datetime.datetime(2026, 12, 7, 23, 30, 12, 500000,
                                                                   tzinfo=datetime.UTC)
    assert created_at("2026-12-07T23:30:12Z") == datetime.datetime(2026, 12, 7, 23, 30, 12, tzinfo=datetime.UTC)


def test_a_stamp_with_an_offset_is_the_same_instant_in_utc():
    assert created_at("2026-12-08T00:30:12.123456789+01:00") == created_at("2026-12-07T23:30:12.123456Z")


def test_a_stamp_that_is_not_rfc3339_is_a_clear_error():
    import pytest

    from builder.errors import BuildError

    with pytest.raises(BuildError, match=r"the Docker daemon gave a time stamp builder cannot read: 'yesterday'"):
        created_at("yesterday")
    for naive in ("2026-12-07T23:30:12", "2026-12-07T23:30:12.5", "2026-12-07 23:30:12Z"):  # no zone: local time
        with pytest.raises(BuildError, match="cannot read"):
            created_at(naive)


class CountingDaemon:
    """Stands for the API's ``info`` only: how many times the daemon's time was asked."""

    def __init__(self, system_time: str) -> None:
        self.system_time, self.calls = system_time, 0

    def info(self):
        self.calls += 1
        return {"SystemTime": self.system_time}


def test_the_daemon_clock_asks_the_daemon_once_then_runs_on_the_host_monotonic_clock():
    from builder.namelock import DaemonClock

    ticks = iter([100.0, 100.0, 102.5, 160.0])  # this host's monotonic seconds, one per reading
    daemon = CountingDaemon("2026-12-07T23:30:12Z")  # a daemon whose clock is far from this host's
    clock = DaemonClock(daemon, monotonic=lambda: next(ticks))
    start = datetime.datetime(2026, 12, 7, 23, 30, 12, tzinfo=datetime.UTC)
    assert daemon.calls == 0  # not asked until a lock is found held
    assert clock.now() == start
    assert clock.now() == start + datetime.timedelta(seconds=2.5)
    assert clock.now() == start + datetime.timedelta(seconds=60)
    assert daemon.calls == 1
