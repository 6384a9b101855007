"""Dedicated error types, each turned into one clear line at the CLI edge.

Every error carries what went wrong, where, and (when known) how to fix it, so the
CLI prints ``error: <what> (<where>); <hint>`` and exits non-zero, never a traceback.
Each class carries its exit code (as cibuildwheel's errors do), so a script can tell
a wrong option (2) from a failed build (1) without parsing the message.
"""

from __future__ import annotations

EXIT_FAILED = 1  # a build, fetch, push or check failed
EXIT_USAGE = 2  # wrong flags, builder.toml or BUILDER_* variables (as click's usage errors)
EXIT_NOTHING_NEW = 3  # builder nightly: neither ref moved since the last nightly
EXIT_INTERNAL = 70  # a bug in builder (EX_SOFTWARE of sysexits.h); the traceback is in a log file
EXIT_SIGINT = 130  # 128 + SIGINT
EXIT_SIGTERM = 143  # 128 + SIGTERM


class BuilderError(Exception):
    """Base class: a user-facing failure with an optional hint."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, hint: str | None = None, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class ConfigError(BuilderError):
    """builder.toml, BUILDER_* variables or flags are wrong."""

    exit_code = EXIT_USAGE


class ValidationError(BuilderError):
    """A value (ref, URL, name, version, ...) is unsafe or malformed."""

    exit_code = EXIT_USAGE


class RefError(BuilderError):
    """A git ref or repository cannot be resolved."""


class FetchStalled(RefError):
    """git talked to a remote and printed nothing for the stall timeout ([git] stall_timeout)."""


class DockerUnavailable(BuilderError):
    """No Docker daemon answers."""


class BuildError(BuilderError):
    """A stage build or a container step failed."""


class NotEnoughDisk(BuildError):
    """The plan's disk estimate is above the free space in data_dir (exit 1, before any work)."""


class PackageIndexError(BuilderError):
    """The package index refused an operation (conflict, bad wheel, ...)."""


class UploadError(BuilderError):
    """Uploading to a remote index failed."""


def short_message(exc: BaseException) -> str:
    """One line of at most 300 characters from an exception (a docker SDK error's
    ``explanation`` when it has one, which may be bytes)."""
    text = getattr(exc, "explanation", None) or str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(str(text).split())[:300]
