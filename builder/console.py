"""One rich console for the whole CLI (stderr for progress, stdout for data)."""

from __future__ import annotations

from rich.console import Console

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
