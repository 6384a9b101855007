"""The CLI edge: every command listed with a description; errors are one line."""

from __future__ import annotations

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
