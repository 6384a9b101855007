"""Building wheels: the plan, the pipeline that executes it, the container step, caches, resources, verify, nightly."""
