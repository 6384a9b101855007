"""The Bazel cache's figures for `builder cache stats`: the size of each tree a recipe
keeps in it (disk cache, repository cache, output user roots, bazelisk downloads), as
ccache's size is shown beside its hit rate."""

from __future__ import annotations

import re
import shlex

from builder.caches.ccache import parse_location
from builder.config import Config
from builder.engine import ContainerSpec, Engine, Mount
from builder.errors import BuildError
from builder.mounts import BAZEL_CACHE_MOUNT


def du_script(layout: dict[str, str]) -> str:
    """One ``KiB<TAB>path`` line per tree (0 for a tree not made yet)."""
    return "; ".join(f"if [ -d {shlex.quote(p)} ]; then du -sk {shlex.quote(p)}; else printf '0\\t%s\\n' "
                     f"{shlex.quote(p)}; fi" for p in layout.values())


def parse_du(text: str, layout: dict[str, str]) -> dict[str, int]:
    """{name: bytes} from ``du -sk`` lines (pure: unit tested); a tree du did not list is 0."""
    by_path = {}
    for line in text.splitlines():
        match = re.match(r"^(\d+)\s+(/\S*)$", line.strip())
        if match:
            by_path[match.group(2)] = int(match.group(1)) * 1024
    return {name: by_path.get(path, 0) for name, path in layout.items()}


def bazel_cache_sizes(engine: Engine, cfg: Config, image: str, layout: dict[str, str]) -> dict[str, int]:
    """Sizes of the trees in ``[cache] bazel``, measured read-only in a container (a volume
    that does not exist yet is all zeros, and is not created by looking)."""
    location = parse_location(cfg.cache.bazel, "cache.bazel")
    if not layout or (location.kind == "volume" and not engine.volume_exists(location.value)):
        return dict.fromkeys(layout, 0)
    result = engine.run(ContainerSpec(image=image, command=["sh", "-c", du_script(layout)], network="none",
                                      mounts=[Mount(location.docker_source, BAZEL_CACHE_MOUNT, read_only=True)]))
    if result.exit_code != 0:
        raise BuildError(f"cannot measure the Bazel cache {location.describe()}: {result.output.strip()[:300]}")
    return parse_du(result.output, layout)
