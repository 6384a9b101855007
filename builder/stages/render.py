"""Render dockerfiles/*.Dockerfile.j2 with Jinja2.

StrictUndefined makes every variable required, and autoescape is off (this is not
HTML); instead values that reach a ``RUN`` line go through the ``q`` filter
(shell-quote) after being validated where they entered (config, refs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from builder.errors import BuildError, ValidationError
from builder.validate import shell_quote


def templates_dir() -> Path:
    """The dockerfiles/ folder: beside the package in a checkout, inside it when installed."""
    here = Path(__file__).resolve().parent.parent  # builder/, which holds dockerfiles/
    for candidate in (here.parent / "dockerfiles", here / "dockerfiles"):
        if candidate.is_dir():
            return candidate
    raise BuildError("dockerfiles/ templates not found", "reinstall builder")  # pragma: no cover


def _quote(value: object) -> str:
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()  # raises UndefinedError naming the variable
    return shell_quote(value)


def _environment(directory: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = _quote
    return env


def render_template(name: str, context: dict[str, Any], directory: Path | None = None) -> str:
    """Render one template; a missing variable is a BuildError naming it and the template."""
    env = _environment(directory or templates_dir())
    try:
        return env.get_template(name).render(**context)
    except jinja2.UndefinedError as exc:
        raise BuildError(f"template {name}: {exc.message}",
                         "every template variable must be provided") from None
    except jinja2.TemplateNotFound:
        raise BuildError(f"template {name} not found in {directory or templates_dir()}") from None
    except ValidationError as exc:
        raise BuildError(f"template {name}: {exc.message}") from None
