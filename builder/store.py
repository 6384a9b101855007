"""The user's download cache: verified files, content-addressed by sha256.

One cache per user, not per data dir: a teammate's fresh data dir (or a second index on
the same machine) finds the torch wheel, numpy or an sdist that any earlier run here
already downloaded and checked, instead of fetching them again. The default follows the
XDG base directory spec, as pip's and uv's caches do: ``$XDG_CACHE_HOME/builder/downloads``
(``~/.cache/builder/downloads``); ``[prebuilt] download_cache`` moves it.

Layout: ``<root>/sha256/<hex>/<filename>``. The directory names the content, so two runs
(or two uids) that download the same file write the same path with the same bytes, and
a lookup by an upstream page's sha256 needs no index of its own. The file keeps its name
because pip and the package index need wheel and sdist names. Partial downloads are
written under ``<root>/tmp`` and renamed into place once their hash is checked: nothing
half-written ever has a content path.

Shared by several uids (like the ccache volume): directories are created setgid and
group-writable (mode 2775, whatever the umask), files are never rewritten once in
place, so a teammate in the same group reads and adds, and one outside it still reads.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SHARED_DIR_MODE = 0o2775  # setgid: new entries keep the directory's group; group-writable


def user_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/builder`` (an absolute value only, as the spec says), else
    ``~/.cache/builder``."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "builder"


def download_cache(configured: str = "", environ: Mapping[str, str] | None = None) -> Path:
    """``[prebuilt] download_cache`` when set, else the user's ``downloads`` cache."""
    return Path(configured).expanduser() if configured else user_cache_dir(environ) / "downloads"


@dataclass(frozen=True)
class DownloadStore:
    root: Path

    def path(self, sha256: str, filename: str) -> Path:
        """Where the file with this content and name lives (whether or not it is there)."""
        return self.root / "sha256" / sha256 / filename

    @property
    def parts(self) -> Path:
        """Partial downloads, renamed into :meth:`path` once checked."""
        return self.root / "tmp"

    def make_dir(self, directory: Path) -> Path:
        """Create ``directory`` (inside the root) and every missing parent up to the root,
        each setgid and group-writable; a directory that already exists is left as it is
        (it may be a teammate's)."""
        directory = Path(directory)
        self.root.parent.mkdir(parents=True, exist_ok=True)  # ~/.cache itself: the user's own
        missing = []
        for candidate in (directory, *directory.parents):
            if candidate.is_dir():
                break
            missing.append(candidate)
            if candidate == self.root:
                break
        for created in reversed(missing):
            with contextlib.suppress(FileExistsError):
                created.mkdir()
                with contextlib.suppress(OSError):  # the umask took group write; put it back
                    os.chmod(created, SHARED_DIR_MODE)
        return directory
