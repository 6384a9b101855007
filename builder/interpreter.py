"""The interpreter wheels are fetched and checked for: the python stage's.

Its Python series comes from ``[python] version``, its glibc from the Debian suite of
the base image (``[base] suite``) and its architecture from the machine whose Docker
engine runs the stages (this one). pip is asked for exactly these tags when it resolves
(builder.index.resolve), and the index's wheels are judged installable by the same tags
(builder.index.deps), so a cp312 or aarch64 wheel never stands in for the one needed.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Any

# glibc (2.N) of each Debian suite: the newest manylinux_2_N tag its interpreter installs.
SUITE_GLIBC_MINOR = {"buster": 28, "bullseye": 31, "bookworm": 36, "trixie": 41}
# An unknown suite (sid, a derivative): only what every glibc since 2.17 installs.
OLDEST_GLIBC_MINOR = 17
_MACHINE_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def host_machine() -> str:
    machine = platform.machine().lower()
    return _MACHINE_ALIASES.get(machine, machine)


@dataclass(frozen=True)
class Interpreter:
    series: str = "3.11"  # [python] version
    suite: str = "bookworm"  # [base] suite
    machine: str = field(default_factory=host_machine)

    @classmethod
    def of(cls, cfg: Any) -> Interpreter:  # cfg: builder.config.Config
        return cls(cfg.python.version, cfg.base.suite)

    @property
    def version(self) -> tuple[int, int]:
        major, minor = self.series.split(".")[:2]
        return int(major), int(minor)

    @property
    def abi(self) -> str:
        return "cp{}{}".format(*self.version)

    @property
    def platforms(self) -> tuple[str, ...]:
        """Platform tags newest first: manylinux_2_N down to 2_17, the manylinux2014 alias,
        linux_<arch>, and ``any``."""
        newest = SUITE_GLIBC_MINOR.get(self.suite, OLDEST_GLIBC_MINOR)
        tags = [f"manylinux_2_{minor}_{self.machine}" for minor in range(newest, OLDEST_GLIBC_MINOR - 1, -1)]
        return (*tags, f"manylinux2014_{self.machine}", f"linux_{self.machine}", "any")

    def markers(self) -> dict[str, str]:
        """PEP 508 marker values (``platform_release``/``platform_version`` are left to the
        host's: a container runs on the host's kernel)."""
        full = self.series if self.series.count(".") >= 2 else f"{self.series}.0"
        return {"python_version": "{}.{}".format(*self.version), "python_full_version": full,
                "implementation_name": "cpython", "implementation_version": full,
                "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
                "platform_machine": self.machine, "os_name": "posix", "extra": ""}


def interpreter(value: Interpreter | str) -> Interpreter:
    """An Interpreter from itself or from a bare Python series (the bookworm defaults)."""
    return value if isinstance(value, Interpreter) else Interpreter(value)
