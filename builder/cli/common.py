"""What every `builder` command shares: the Typer app they register on, the loaded
Config, option bounds, and the one place errors become a line and an exit code.

Each sub-command loads the Config once, calls into the library and turns a
BuilderError into one ``error: <message>; <hint>`` line and the exit code of its class
(builder.errors). Usage errors (an unknown option, a value out of range) are one such
line too, exit 2. Anything unexpected is a bug: one ``error: internal error ...`` line
naming a log file under the data dir that holds the traceback, exit 70 (the traceback
is printed as well with BUILDER_DEBUG=1).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import requests
import typer

from builder import __version__
from builder.config import Config, default_data_dir, find_config_file, load_config
from builder.console import print_error
from builder.errors import EXIT_FAILED, EXIT_INTERNAL, EXIT_SIGINT, EXIT_SIGTERM, BuilderError
from builder.source.gitprogress import set_fetch_options

app = typer.Typer(
    name="builder",
    help="Containerized, reproducible builds of PyTorch and PyTorch/XLA wheels.",
    epilog="Example: builder demo   (see `builder COMMAND --help` for each command's example)",
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])

_state: dict[str, Any] = {"config_path": None, "config": None, "no_host_ca": False}

# typer's usage errors (its bundled click, or click itself in older typer releases):
# found from the public BadParameter rather than a private module path.
_ClickException: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")

# What `builder` alone prints: the three commands a newcomer needs, before the full list.
FIRST_STEPS = """builder: containerized, reproducible builds of PyTorch and PyTorch/XLA wheels.

Start here:
  builder demo                                   the whole pipeline on bundled example repos (minutes, no config)
  builder wheels --torch main                    build a torch wheel from a git ref into the local index
  builder wheels --xla master                    torch_xla with the torch its .torch_commit pins (torch main
                                                 needs C++20, xla master compiles as C++17: not together)
  builder index serve                            serve that index over HTTP (pip install --index-url URL torch)

All commands: builder --help"""


def connection_lost(exc: Exception) -> tuple[str, str]:
    """A connection that failed mid-command, as (message, hint): the Docker engine (the
    docker SDK speaks HTTP over its socket) or another server, named by its URL."""
    request = getattr(exc, "request", None)
    url = getattr(request, "url", "") or ""
    if url.startswith("http+docker://"):
        return ("lost the connection to the Docker engine " + os.environ.get("DOCKER_HOST", "(/var/run/docker.sock)"),
                "check that it runs (`docker info`; as root `.ci/dockerd-up` starts one), then run the command "
                "again: finished steps are reused")
    return f"cannot reach {url.split('?')[0] or 'a server'}", "check the URL and that the server runs"


def handle_errors(func: F) -> F:
    """Turn BuilderError into one ``error:`` line and its exit code (130/143 on signals,
    70 with a saved traceback for anything unexpected)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BuilderError as exc:
            print_error(exc.message, exc.hint)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            print_error("interrupted (SIGINT)", "containers and temporary files removed")
            raise typer.Exit(EXIT_SIGINT) from None
        except Terminated:
            print_error("terminated (SIGTERM)", "containers and temporary files removed")
            raise typer.Exit(EXIT_SIGTERM) from None
        except (typer.Exit, typer.Abort, _ClickException, BrokenPipeError):
            raise  # exit codes, usage errors and a closed pipe (`| head`), handled by typer / run()
        except requests.exceptions.ConnectionError as exc:
            print_error(*connection_lost(exc))
            raise typer.Exit(EXIT_FAILED) from None
        except OSError as exc:
            if exc.filename is None:  # not about a path the user can fix: a bug
                raise typer.Exit(report_internal_error(exc)) from None
            print_error(os_error_text(exc), "check the path, its permissions and free space")
            raise typer.Exit(EXIT_FAILED) from None
        except Exception as exc:
            raise typer.Exit(report_internal_error(exc)) from None

    return wrapper  # type: ignore[return-value]


def os_error_text(exc: OSError) -> str:
    """``Permission denied: /srv/x`` from an OSError naming a path (two for a rename)."""
    names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
    return f"{exc.strerror or type(exc).__name__}: {names}"


def output_dir(path: Path, option: str) -> Path:
    """Create the directory a user named for output (absolute), or fail with one clear error."""
    target = Path(os.path.abspath(path))
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=target, prefix=".builder-probe-")
        probe.close()
    except OSError as exc:
        raise BuilderError(f"{option} {path}: cannot write there ({exc.strerror or exc})",
                           "pass a writable directory") from None
    return target


def _debug() -> bool:
    return os.environ.get("BUILDER_DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}


def _crash_log_dir() -> Path:
    """<data_dir>/logs of the loaded config; before a config loaded, of $BUILDER_DATA_DIR
    or the default data dir."""
    cfg: Config | None = _state.get("config")
    if cfg is not None:
        return cfg.logs_dir
    raw = os.environ.get("BUILDER_DATA_DIR") or default_data_dir()
    return Path(os.path.abspath(os.path.expanduser(raw))) / "logs"


def write_crash_log(trace: str) -> Path | None:
    """Write the traceback to a new file under the logs dir (else the temp dir); None if neither works."""
    name = f"crash-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    for directory in (_crash_log_dir(), Path(tempfile.gettempdir())):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / name
            with open(path, "x", encoding="utf-8", errors="backslashreplace") as f:
                f.write(f"builder {__version__}: {' '.join(sys.argv)}\n{trace}")
            return path
        except (OSError, ValueError):
            continue
    return None


def report_internal_error(exc: BaseException) -> int:
    """One ``error:`` line for a bug; the traceback goes to a log file (and stderr with BUILDER_DEBUG=1)."""
    trace = "".join(traceback.format_exception(exc))
    if _debug():
        sys.stderr.write(trace)
    path = write_crash_log(trace)
    where = f"the traceback is in {path}" if path else "the traceback could not be saved"
    print_error(f"internal error: {type(exc).__name__}: {exc}",
                f"{where}; please report it (BUILDER_DEBUG=1 also prints it)")
    return EXIT_INTERNAL


# Bounds of numeric options (MAX_JOBS is the config's): beyond them a value is a typo,
# not a wish.
MAX_KEEP = 100_000
MAX_RETRIES = 100
MAX_BACKOFF_SECONDS = 3600.0


def in_range(minimum: float, maximum: float) -> Callable[[Any], Any]:
    """A typer option callback: the value must be finite and within [minimum, maximum], so
    NaN, inf, a negative count or delay is a usage error before anything runs."""

    def check(value: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, float) and not math.isfinite(value):
            raise typer.BadParameter(f"{value} is not a finite number")
        if not minimum <= value <= maximum:
            raise typer.BadParameter(f"{value} is not between {minimum:g} and {maximum:g}")
        return value

    return check


class Terminated(BaseException):
    """SIGTERM, raised like KeyboardInterrupt so that every ``finally`` and context
    manager (containers, temp dirs, locks) unwinds the same way."""


def get_config(overrides: dict[str, Any] | None = None) -> Config:
    path = find_config_file(_state["config_path"], os.environ)
    if _state["no_host_ca"]:
        overrides = {**(overrides or {}), "ca.extra_certificates": ""}
    cfg = load_config(path, os.environ, overrides)
    _state["config"] = cfg
    set_fetch_options(stall_timeout=cfg.git.stall_timeout)  # every clone and fetch of this command
    return cfg


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"builder {__version__}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    config: Path | None = typer.Option(None, "--config", "-c", help="Path to builder.toml."),
    no_host_ca: bool = typer.Option(False, "--no-host-ca",
                                    help="Do not trust the CA bundle $SSL_CERT_FILE / $REQUESTS_CA_BUNDLE / "
                                         "$PIP_CERT names (same as \\[ca] extra_certificates = \"\")."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit.",
                                 callback=_print_version, is_eager=True),
) -> None:
    """Containerized, reproducible builds of PyTorch and PyTorch/XLA wheels."""
    if ctx.invoked_subcommand is None:
        typer.echo(FIRST_STEPS)
        raise typer.Exit(0)
    _state["config_path"] = str(config) if config else None
    _state["no_host_ca"] = no_host_ca
