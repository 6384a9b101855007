"""The command line: one module per command group; common.py holds what they share (the
Typer app, the Config, the one place errors become an ``error:`` line and an exit code)
and main.py only assembles them. Commands parse options, call into the library and
print; nothing else."""
