"""Dynamic ``version`` of the torch wheel (a [[tool.dynamic-metadata]] provider).

Follows pytorch/pytorch ``tools/metadata/version.py`` (added by #180247), which keeps
the rule of ``tools/generate_torch_version.py``: ``version.txt``, replaced by
PYTORCH_BUILD_VERSION when set (PYTORCH_BUILD_NUMBER must then be set too; a number
> 1 appends ``.postN``), else ``version.txt + "+git" + sha[:7]``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def git_sha() -> str:
    try:
        out = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=ROOT, stderr=subprocess.DEVNULL)
        return out.decode("ascii").strip()
    except (OSError, subprocess.CalledProcessError):
        return "Unknown"


def torch_version() -> str:
    version = (ROOT / "version.txt").read_text().strip()
    if os.getenv("PYTORCH_BUILD_VERSION"):
        if os.getenv("PYTORCH_BUILD_NUMBER") is None:
            raise RuntimeError("PYTORCH_BUILD_VERSION is set, so PYTORCH_BUILD_NUMBER must be set too")
        build_number = int(os.environ["PYTORCH_BUILD_NUMBER"])
        version = os.environ["PYTORCH_BUILD_VERSION"]
        if build_number > 1:
            version += f".post{build_number}"
        return version
    sha = git_sha()
    return version + ("+git" + sha[:7] if sha != "Unknown" else "")


def dynamic_metadata(settings, project):  # noqa: ARG001 - the provider protocol
    return {"version": torch_version()}
