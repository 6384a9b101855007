"""Compiler and build caches: ccache locations and stats, sccache-dist, and the cache
volumes and Bazel trees a wheel step mounts."""
