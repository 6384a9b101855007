"""The CLI edge: every command listed with a description; errors are one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_builder


def test_help_lists_every_command():
    done = run_builder("--help", check=True)
    for command in ("config", "render", "images", "base"):
        assert command in done.stdout


def test_no_daemon_is_one_clear_error(tmp_path):
    done = run_builder("images", env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock",
                                      "BUILDER_DATA_DIR": str(tmp_path)})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: cannot reach the Docker daemon")
    assert "DOCKER_HOST" in lines[0]


def test_config_error_is_one_line(tmp_path):
    bad = tmp_path / "builder.toml"
    bad.write_text('[build]\njobs = "x"\n')
    done = run_builder("config", config=bad)
    assert done.returncode == 2  # a configuration error
    assert done.stderr.strip() == f"error: {bad}:2: build.jobs must be an integer, got 'x'"


def test_missing_config_file(tmp_path):
    done = run_builder("config", config=tmp_path / "nope.toml")
    assert done.returncode == 2 and "not found" in done.stderr


def _boom_command():
    from builder.cli.common import handle_errors

    @handle_errors
    def boom() -> None:
        raise RuntimeError("broken [/x] value")

    return boom


def test_unexpected_exception_is_one_line_and_a_saved_traceback(tmp_path, monkeypatch, capsys):
    import typer

    from builder.cli import common as cli

    monkeypatch.setattr(cli, "_state", {"config_path": None, "config": None})
    monkeypatch.setenv("BUILDER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("BUILDER_DEBUG", raising=False)
    with pytest.raises(typer.Exit) as info:
        _boom_command()()
    assert info.value.exit_code == 70
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    prefix = "error: internal error: RuntimeError: broken [/x] value; the traceback is in "
    assert lines[0].startswith(prefix)
    log = Path(lines[0][len(prefix):].split(";")[0])
    assert log.parent == tmp_path / "data" / "logs" and log.name.startswith("crash-")
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "in boom" in text


def test_builder_debug_also_prints_the_traceback(tmp_path, monkeypatch, capsys):
    import typer

    from builder.cli import common as cli

    monkeypatch.setattr(cli, "_state", {"config_path": None, "config": None})
    monkeypatch.setenv("BUILDER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BUILDER_DEBUG", "1")
    with pytest.raises(typer.Exit) as info:
        _boom_command()()
    assert info.value.exit_code == 70
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "RuntimeError: broken [/x] value" in err
    assert [line for line in err.splitlines() if line.startswith("error:")][0].startswith("error: internal error")


def test_crash_log_falls_back_to_the_temp_dir(tmp_path, monkeypatch):
    from builder.cli import common as cli

    monkeypatch.setattr(cli, "_state", {"config_path": None, "config": None})
    monkeypatch.setenv("BUILDER_DATA_DIR", "/proc/no-such-dir")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(cli.tempfile, "tempdir", None)
    path = cli.write_crash_log("Traceback ...")
    assert path is not None and path.parent == tmp_path and path.read_text().endswith("Traceback ...")


def test_usage_error_is_one_error_line():
    done = run_builder("wheels", "--jobs", "many")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: invalid value for '--jobs' / '-j': ")  # the rest is typer's wording
    assert line.endswith("; see `builder wheels --help`")


def test_version():
    done = run_builder("--version", check=True)
    assert done.stdout.startswith("builder ")


def test_a_lost_docker_connection_is_one_line_not_an_internal_error(capsys, monkeypatch):
    import requests
    import typer

    from builder.cli.common import handle_errors

    @handle_errors
    def command() -> None:
        request = requests.Request("GET", "http+docker://localhost/v1.43/images/x/json").prepare()
        raise requests.exceptions.ConnectionError("Connection refused", request=request)

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    with pytest.raises(typer.Exit) as caught:
        command()
    assert caught.value.exit_code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: lost the connection to the Docker engine (/var/run/docker.sock); check that it runs")
    assert err.count("\n") == 1 and "internal error" not in err
