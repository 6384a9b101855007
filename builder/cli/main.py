"""The `builder` command line, assembled: every command module registers itself on the
app of builder.cli.common when imported here; ``run`` turns what escapes a command into
one ``error:`` line and its exit code. The commands import builder.cli.common, never
this module, so the CLI has no import circle."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import typer

from builder.cli.common import Terminated, _ClickException, _UsageError, app, report_internal_error
from builder.console import print_error
from builder.errors import EXIT_SIGINT, EXIT_SIGTERM, EXIT_USAGE, BuilderError


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _register() -> tuple[ModuleType, ...]:
    """Import every command module: each registers its commands on ``app`` (the modules are
    returned so the imports are used). Called from main(), so that a broken install is one
    error line with the traceback saved."""
    # `index` before `xla`: `index fetch` joins the `index` group `index` creates
    from builder.cli import cache, demo, dist, images, index, nightly, profile, repro, wheels, xla
    from builder.cli.examples import attach

    attach(app)
    return cache, demo, dist, images, index, nightly, profile, repro, wheels, xla


def run(args: Sequence[str]) -> int:
    """Run the CLI on ``args`` and return the exit code; every failure is one ``error:`` line."""
    try:
        code = app(args=list(args), prog_name="builder", standalone_mode=False)
    except _ClickException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `builder index` alone: the help
            exc.show()  # type: ignore[attr-defined]
            return EXIT_USAGE
        ctx = getattr(exc, "ctx", None)
        path = ctx.command_path if ctx is not None else "builder"
        message = exc.format_message().rstrip(".")  # type: ignore[attr-defined]
        print_error(message[:1].lower() + message[1:], f"see `{path} --help`")
        return EXIT_USAGE if isinstance(exc, _UsageError) else int(getattr(exc, "exit_code", 1))
    except typer.Abort:
        print_error("aborted")
        return 1
    except BuilderError as exc:  # raised outside a command (a callback)
        print_error(exc.message, exc.hint)
        return exc.exit_code
    except KeyboardInterrupt:
        print_error("interrupted (SIGINT)")
        return EXIT_SIGINT
    except Terminated:
        print_error("terminated (SIGTERM)")
        return EXIT_SIGTERM
    except Exception as exc:
        return report_internal_error(exc)
    return code if isinstance(code, int) else 0


def main() -> None:
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _register()
    except Exception as exc:  # a broken install: said once, with the traceback saved
        sys.exit(report_internal_error(exc))
    sys.exit(run(sys.argv[1:]))
