"""Running a build: the request as a package graph, the wheel plan, the pipeline that
executes it, the container step, the smoke, and verify (a recorded step run again)."""
