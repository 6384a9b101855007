"""The order the suite's modules are handed to the workers: the costliest first.

`make test` gives a whole module to a worker (pytest-xdist ``--dist loadfile``). By default
xdist hands out the modules with the most tests first, which puts the parametrized unit
modules (hundreds of tests, seconds in all) at the front and the integration modules with a
few long tests at the back: on a machine that had never run builder, test_real_xla (its
first run downloads 4 GB and commits two layers of several GB) started after most of the
suite and ran on alone while the other worker idled. Longest first (LPT) is the classic
cure: the long modules start at once and overlap, the short ones fill in at the end. The
Makefile turns xdist's reordering off (``--no-loadscope-reorder``) so this order is the one
used. A shuffled run (pytest-randomly, `make test-random`) keeps its own order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

# Wall seconds each integration module took in `bash .ci/run` (two workers) on a machine that
# had never run builder (no images, no download cache), 2026-12-08 at 1b0a8d3: measured from
# the run's per-test result times (`PYTEST_ADDOPTS=-vv`, each line time-stamped). Only the
# order matters, so a rough figure serves; a module not listed counts as 0 (after these, in
# file order), and tests/unit/test_order.py fails when the table names a module that does not
# exist or leaves an integration module out.
MODULE_SECONDS: dict[str, float] = {
    "tests/integration/test_real_xla.py": 576,
    "tests/integration/test_extension.py": 183,
    "tests/integration/test_images.py": 134,
    "tests/integration/test_repro.py": 134,
    "tests/integration/test_torchvision.py": 125,
    "tests/integration/test_dist.py": 119,
    "tests/integration/test_wheels.py": 101,
    "tests/integration/test_registry.py": 95,
    "tests/integration/test_torch_tpu.py": 87,
    "tests/integration/test_host_ca.py": 86,
    "tests/integration/test_xla_layout.py": 64,
    "tests/integration/test_pep517.py": 61,
    "tests/integration/test_daemon_restart.py": 57,
    "tests/integration/test_index_deps.py": 52,
    "tests/integration/test_team_cache.py": 36,
    "tests/integration/test_faults.py": 33,
    "tests/integration/test_profile.py": 25,
    "tests/integration/test_audit.py": 22,
    "tests/integration/test_nightly.py": 20,
    "tests/integration/test_upload_servers.py": 15,
    "tests/integration/test_demo.py": 15,
    "tests/integration/test_pins.py": 12,
    "tests/integration/test_index_pip.py": 7,
    "tests/integration/test_installed_layer.py": 5,
    "tests/integration/test_setup.py": 4,
    "tests/integration/test_disk.py": 4,
    "tests/integration/test_shared_downloads.py": 1,
}


class Item(Protocol):
    nodeid: str


def module_of(nodeid: str) -> str:
    """``tests/integration/test_x.py`` of ``tests/integration/test_x.py::test_y[z]``."""
    return nodeid.split("::", 1)[0]


def costliest_first(items: Sequence[Item], seconds: dict[str, float] | None = None) -> list[Item]:
    """``items`` with the modules in decreasing cost, each module's tests kept together and
    in their own order; modules of equal cost keep their file order (a stable sort)."""
    table = MODULE_SECONDS if seconds is None else seconds
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(module_of(item.nodeid), len(first_seen))
    return sorted(items, key=lambda item: (-table.get(module_of(item.nodeid), 0.0),
                                           first_seen[module_of(item.nodeid)]))
