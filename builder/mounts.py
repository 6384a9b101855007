"""Where things are inside a build container: one list, read by the recipes (which put
them in env and scripts) and by the build (which mounts them)."""

CCACHE_MOUNT = "/ccache"  # the shared ccache (volume or host dir)
SOURCE_ROOT = "/src"  # checkouts: /src/<recipe>; a fixed path keeps compile commands stable for ccache
INDEX_MOUNT = "/index"  # the local package index, read-only
OUT_MOUNT = "/out"  # the step's private output dir (wheel, stats, logs)
BAZEL_CACHE_MOUNT = "/bazel-cache"  # Bazel disk cache and bazelisk downloads
DIST_CLIENT_CONF = "sccache-dist.conf"  # in the out dir: the sccache-dist client config (SCCACHE_CONF)
