"""Index commands: `builder index add|list|show|prune|serve` and `builder push`.

Only option parsing and printing live here; the work is in builder.index.directory, builder.index.upload
and builder.index.serve. Data goes to stdout (JSON with --json), progress and errors to stderr.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from builder.cli.common import MAX_BACKOFF_SECONDS, MAX_KEEP, MAX_RETRIES, app, get_config, handle_errors, in_range
from builder.console import err, out, print_table
from builder.errors import PackageIndexError
from builder.index.directory import DirectoryIndex
from builder.recipes import built_projects

index_app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
app.add_typer(index_app, name="index", help="The local wheel index (PEP 503 directory, file:// or served).")

# `index list`: the file the long field
INDEX_COLUMNS = ("file", "sha256", "requires-python", "build key", "limited by")
_DIR_HELP = "Index directory (default: \\[index] dir in builder.toml, else <data_dir>/index)."


def _index(directory: Path | None) -> DirectoryIndex:
    return DirectoryIndex(directory if directory is not None else get_config().index_dir)


@index_app.command("add")
@handle_errors
def index_add(
    files: list[Path] = typer.Argument(..., help="Wheel files to publish."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite a published wheel with different bytes."),
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
    no_deps: bool = typer.Option(False, "--no-deps", help="Publish the wheels only, not their dependencies."),
    extras: list[str] = typer.Option([], "--extra", help="Also fetch the dependencies of this extra "
                                     "(as pip install 'torch[opt-einsum]'); repeatable."),
) -> None:
    """Publish wheels into the local index (identical re-adds are no-ops), with the
    dependencies they need at run time (fetched from [prebuilt] index_url) unless --no-deps."""
    from builder.index.deps import fetch_dependencies

    index = _index(directory)
    added = []
    for path in files:
        result = index.add(path, replace=replace)
        added.append(result.filename)
        out.print(f"{result.status:<9} {result.filename}  sha256={result.sha256}", markup=False)
    if not no_deps:
        note = lambda text: err.print(text, markup=False, highlight=False)  # noqa: E731
        note(fetch_dependencies(get_config(), index, added, note, extras=tuple(extras), own_projects=built_projects()))
    err.print(f"index: {index.simple_url()}", markup=False)


def limited_by(platform: dict) -> str:
    """What keeps a built wheel's tag (in its file name) from the next more compatible
    policy: its first limiting symbol version (``GLIBCXX_3.4.21``, "+N" more), "-" when
    none does; "" for a wheel builder did not audit."""
    limit = [str(s).split(" ")[0] for s in platform.get("limited_by") or []]
    if not platform.get("tag"):
        return ""
    return (limit[0] + (f" +{len(limit) - 1}" if len(limit) > 1 else "")) if limit else "-"


@index_app.command("list")
@handle_errors
def index_list(
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
) -> None:
    """List the wheels in the local index."""
    index = _index(directory)
    entries = index.entries()
    if as_json:
        typer.echo(json.dumps([e.as_dict() for e in entries], indent=2))
        return
    if not entries:
        err.print(f"no wheels in {index.root}", markup=False)
        return
    rows = [(e.filename, e.sha256[:12], e.requires_python or "", str((e.manifest or {}).get("build_key", ""))[:12],
             limited_by((e.manifest or {}).get("platform") or {})) for e in entries]
    print_table(out, INDEX_COLUMNS, rows, long="file")


@index_app.command("check")
@handle_errors
def index_check(
    repair: bool = typer.Option(False, "--repair", help="Move corrupt files aside (<index>/corrupt/), rewrite pages."),
    as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON."),
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
) -> None:
    """Verify every published file against its recorded sha256 (manifest and pages);
    exit 1 naming corrupt or missing files, orphan pages and wheels whose file-name tags
    disagree with their WHEEL file."""
    from builder.errors import PackageIndexError
    from builder.index.check import check_index

    index = _index(directory)
    found = check_index(index, repair=repair)
    for problem in found.problems():
        err.print(problem, markup=False, highlight=False)
    for moved in found.moved:
        err.print(f"moved aside {moved}", markup=False)
    after = check_index(index) if repair and not found.ok else found
    if as_json:
        typer.echo(json.dumps({"checked": found.checked, "corrupt": found.corrupt, "missing": found.missing,
                               "orphan_pages": found.orphan_pages,
                               "mistagged": found.mistagged, "moved": found.moved, "ok": after.ok},
                              indent=2))
    if not after.ok:
        from builder.index.wheelcheck import TAG_MISMATCH_HINT
        hint = ("`builder index check --repair` moves corrupt files aside and rewrites the pages; "
                "`builder wheels` then rebuilds what is gone")
        if after.mistagged:  # --repair cannot fix labels: say what does
            only_tags = not (after.corrupt or after.missing or after.orphan_pages)
            hint = TAG_MISMATCH_HINT if only_tags else f"{hint}; mistagged wheels: {TAG_MISMATCH_HINT}"
        raise PackageIndexError(f"index check: {'; '.join(after.problems())}", hint)
    if found.ok:
        err.print(f"index check: {found.checked} files match their recorded sha256", markup=False)
    else:
        err.print(f"index check: repaired; {after.checked} files match their recorded sha256", markup=False)


@index_app.command("show")
@handle_errors
def index_show(
    wheel: str = typer.Argument(..., help="Wheel file name as listed by `builder index list`."),
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
) -> None:
    """Print the manifest recorded for a published wheel, as JSON (null if none)."""
    manifest = _index(directory).manifest(wheel)
    typer.echo(json.dumps(manifest, indent=2, sort_keys=True))


@index_app.command("prune")
@handle_errors
def index_prune(
    keep: int = typer.Option(..., "--keep", help="How many newest versions of each project to keep (>= 1).",
                              callback=in_range(1, MAX_KEEP)),
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
) -> None:
    """Remove all but the newest N versions of each project."""
    removed = _index(directory).prune(keep)
    for name in removed:
        out.print(f"removed {name}", markup=False)
    err.print(f"{len(removed)} file(s) removed", markup=False)


@index_app.command("serve")
@handle_errors
def index_serve(
    port: int = typer.Option(8080, "--port", help="Port to listen on.", callback=in_range(1, 65535)),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (0.0.0.0 exposes it)."),
    auth: Path | None = typer.Option(None, "--auth", help="htpasswd file: allow these users to upload. "
                                     "Without it the server is read-only."),
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
) -> None:
    """Serve the local index over HTTP with pypiserver until Ctrl-C."""
    from builder.index.serve import run_server, server_command

    index = _index(directory)
    cmd = server_command(index.root, host=host, port=port, auth=auth)

    def ready(url: str) -> None:
        out.print(url, markup=False)
        err.print(f"serving {cmd.files_dir} ({'uploads with --auth users' if auth else 'read-only'}); "
                  "Ctrl-C stops", markup=False)

    def regenerate() -> None:
        try:
            index.regenerate()
        except PackageIndexError as exc:  # keep serving; the next change (or `index add`) retries
            err.print(f"warning: could not regenerate the index pages: {exc}", markup=False)
        else:
            err.print(f"index pages regenerated ({index.simple_url()})", markup=False)

    code = run_server(cmd, on_ready=ready, on_change=regenerate)
    if code != 0:
        raise PackageIndexError(f"pypiserver exited with code {code}")
    err.print("stopped", markup=False)


@app.command("push")
@handle_errors
def push(
    wheels: list[Path] = typer.Argument(..., help="Wheel files to upload."),
    to: str = typer.Option(..., "--to", help="Upload URL: pypiserver root or devpi index (http://h/user/index/)."),
    user: str | None = typer.Option(None, "--user", help="User name (else from ~/.netrc)."),
    password_file: Path | None = typer.Option(None, "--password-file",
                                              help="File holding the password (else $BUILDER_INDEX_PASSWORD, "
                                                   "else ~/.netrc)."),
    retries: int = typer.Option(3, "--retries", help="Retries for connection errors and 5xx answers.",
                                 callback=in_range(0, MAX_RETRIES)),
    backoff: float = typer.Option(1.0, "--backoff", help="First retry delay in seconds (doubles each time).",
                                   callback=in_range(0, MAX_BACKOFF_SECONDS)),
) -> None:
    """Upload wheels to a remote index, skipping files already there with the same sha256."""
    from builder.index.upload import push_wheel, resolve_credentials, split_credentials

    clean, url_user, url_password = split_credentials(to)
    user, password = resolve_credentials(clean, user or url_user, url_password, password_file, os.environ)
    for path in wheels:
        result = push_wheel(path, clean, user=user, password=password, retries=retries, backoff=backoff)
        out.print(f"{result.status:<8} {result.filename}  sha256={result.sha256}  -> {result.url}",
                  markup=False)
