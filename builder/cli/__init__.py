"""The command line: one module per command group over main.py (the Typer app, the one
place errors become an ``error:`` line and an exit code). Commands parse options, call
into the library and print; nothing else."""
