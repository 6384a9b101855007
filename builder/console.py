"""One rich console for the whole CLI (stderr for progress, stdout for data).

Markup and emoji codes are off on both: what is printed carries user-influenced text
(config values, refs, paths, tool output), and ``[bold]``, ``[/x]`` or ``:smile:`` in a
value must print as typed, never restyle it, vanish or crash the printer. Where a style
is wanted it is given as a rich ``Text`` style, never as markup in the string.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)

# A progress line for the user ("downloading 3 wheels ..."): the CLI passes a printer, tests a list.append.
Note = Callable[[str], None]

# An error names the bad value; a megabyte-long value must not become a megabyte-long line.
MAX_PART_CHARS = 2000
# Categories shown escaped: control (ESC sequences, NUL, CR), format (bidi overrides,
# zero-width) and lone surrogates (bytes of a non-UTF-8 argument or file name).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})


def printable(text: str, limit: int = MAX_PART_CHARS) -> str:
    """``text`` with control characters escaped (newline and tab kept) and shortened to ``limit``."""
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    if all(c in "\n\t" or unicodedata.category(c) not in _ESCAPED_CATEGORIES for c in text):
        return text
    return "".join(c if c in "\n\t" or unicodedata.category(c) not in _ESCAPED_CATEGORIES
                   else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)


def error_text(message: str, hint: str | None = None) -> str:
    """The text of an ``error:`` line: ``<message>; <hint>``. Lines after the first (a log
    tail in the message) are indented, so the only line starting with ``error:`` is the first."""
    text = printable(message) + (f"; {printable(hint)}" if hint else "")
    return "\n  ".join(text.split("\n"))


def print_error(message: str, hint: str | None = None) -> None:
    err.print(Text.assemble(("error:", "bold red"), " ", error_text(message, hint)))


# Tables for people. Below WIDE_COLUMNS a table is printed the way pip and cibuildwheel print
# such things: one line per row, short fields aligned, the long field (a file name, advice)
# last and whole. When a row would not fit the terminal that way, every long field goes
# on its own indented line under its row instead, so that a file name is never split at
# the terminal's edge and advice is never squeezed into what is left of a line (let alone
# folded into a narrow column). At WIDE_COLUMNS or more a boxed table is drawn when every
# row fits on one line of it; otherwise the lines are printed there too.
WIDE_COLUMNS = 100
_GAP = "  "
_INDENT = "    "


def print_table(console: Console, columns: Sequence[str], rows: Sequence[Sequence[str]], *, long: str,
                title: str = "", notes: Sequence[str] = ()) -> None:
    """Print ``rows`` under ``columns`` (``long`` names the long column) after a ``title``
    line, followed by ``notes`` lines; no rows: no header. Text is never wrapped by rich."""
    def say(*lines: str) -> None:
        for line in lines:
            console.print(Text(line), soft_wrap=True, highlight=False)

    say(*([title] if title else []))
    table = _table(columns, rows)
    unbounded = console.options.update_width(10 ** 6)  # its natural width, not clamped to the terminal
    if rows and console.width >= WIDE_COLUMNS and console.measure(table, options=unbounded).maximum <= console.width:
        console.print(table, highlight=False)
    elif rows:
        say(*table_lines(columns, rows, long, console.width))
    say(*notes)


def table_lines(columns: Sequence[str], rows: Sequence[Sequence[str]], long: str, width: int) -> list[str]:
    """The header and a line per row: the other columns padded to their widest cell (a
    column empty in every row left out), then ``long``; the long fields on lines of their
    own, indented, when a row would be wider than ``width``."""
    last = list(columns).index(long)
    short = [i for i in range(len(columns)) if i != last and any(row[i] for row in rows)]
    widths = {i: max(cell_len(text) for text in [columns[i], *(row[i] for row in rows)]) for i in short}
    prefix = sum(widths.values()) + len(_GAP) * len(short)
    below = any(prefix + cell_len(cells[last]) > width for cells in [columns, *rows])

    def lines(cells: Sequence[str]) -> list[str]:
        padded = _GAP.join(cells[i] + " " * (widths[i] - cell_len(cells[i])) for i in short)
        if below:
            return [padded.rstrip(), _INDENT + cells[last]] if cells[last] else [padded.rstrip()]
        return [(padded + _GAP + cells[last]).rstrip() if short else cells[last]]

    return [line for cells in [columns, *rows] for line in lines(cells)]


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    table = Table(*(Column(name, no_wrap=True) for name in columns))
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table
