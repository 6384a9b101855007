"""Dedicated error types, each turned into one clear line at the CLI edge.

Every error carries what went wrong, where, and (when known) how to fix it, so the
CLI prints ``error: <what> (<where>); <hint>`` and exits non-zero, never a traceback.
"""

from __future__ import annotations


class BuilderError(Exception):
    """Base class: a user-facing failure with an optional hint."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class ConfigError(BuilderError):
    """builder.toml, BUILDER_* variables or flags are wrong."""


class ValidationError(BuilderError):
    """A value (ref, URL, name, version, ...) is unsafe or malformed."""


class RefError(BuilderError):
    """A git ref or repository cannot be resolved."""


class DockerUnavailable(BuilderError):
    """No Docker daemon answers."""


class BuildError(BuilderError):
    """A stage build or a container step failed."""


class IndexError_(BuilderError):  # noqa: N801 - avoid shadowing the builtin IndexError
    """The package index refused an operation (conflict, bad wheel, ...)."""


class UploadError(BuilderError):
    """Uploading to a remote index failed."""
