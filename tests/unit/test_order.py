"""The suite's module order (tests/helpers_order.py): costliest first, each module whole."""

from __future__ import annotations

from dataclasses import dataclass

from tests.conftest import REPO
from tests.helpers_order import MODULE_SECONDS, costliest_first, module_of


@dataclass
class FakeItem:  # a collected test is, for the order, its node ID
    nodeid: str


def ids(items):
    return [i.nodeid for i in items]


def test_the_costliest_module_goes_first_and_each_module_stays_whole_and_in_order():
    items = [FakeItem(n) for n in ("tests/unit/test_a.py::x", "tests/integration/test_b.py::one",
                                   "tests/unit/test_a.py::y", "tests/integration/test_c.py::one",
                                   "tests/integration/test_b.py::two[1]", "tests/integration/test_c.py::two")]
    seconds = {"tests/integration/test_b.py": 10.0, "tests/integration/test_c.py": 300.0}
    assert ids(costliest_first(items, seconds)) == [
        "tests/integration/test_c.py::one", "tests/integration/test_c.py::two",
        "tests/integration/test_b.py::one", "tests/integration/test_b.py::two[1]",
        "tests/unit/test_a.py::x", "tests/unit/test_a.py::y"]


def test_modules_of_equal_cost_keep_their_file_order():
    items = [FakeItem(n) for n in ("tests/m2.py::a", "tests/m1.py::a", "tests/m3.py::a", "tests/m1.py::b")]
    assert ids(costliest_first(items, {"tests/m3.py": 5.0})) == [
        "tests/m3.py::a", "tests/m2.py::a", "tests/m1.py::a", "tests/m1.py::b"]


def test_a_module_is_the_part_of_the_node_id_before_the_first_separator():
    assert module_of("tests/integration/test_x.py::test_y[a::b]") == "tests/integration/test_x.py"


def test_the_table_lists_every_integration_module_and_nothing_else():
    modules = {f"tests/integration/{p.name}" for p in (REPO / "tests" / "integration").glob("test_*.py")}
    assert set(MODULE_SECONDS) == modules
    assert all(seconds > 0 for seconds in MODULE_SECONDS.values())
