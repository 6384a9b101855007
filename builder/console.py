"""One rich console for the whole CLI (stderr for progress, stdout for data).

Markup and emoji codes are off on both: what is printed carries user-influenced text
(config values, refs, paths, tool output), and ``[bold]``, ``[/x]`` or ``:smile:`` in a
value must print as typed, never restyle it, vanish or crash the printer. Where a style
is wanted it is given as a rich ``Text`` style, never as markup in the string.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

from rich.console import Console
from rich.text import Text

Note = Callable[[str], None]  # where a step reports progress: one plain line at a time

out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)

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
