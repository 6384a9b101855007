"""The C++ standard each side of a torch / torch_xla source pair compiles with, read at
plan time from the mirrors, so a pair that cannot compile is refused before any build.

torch main's headers need C++20: pytorch/pytorch#176662 turned a C++17 build of code
that includes them into an ``#error`` (the guard in ``torch/csrc/api/include/torch/all.h``
reads ``#error C++NN or later compatible compiler is required to use PyTorch``), and its
``CMakeLists.txt`` sets ``CMAKE_CXX_STANDARD``. pytorch/xla master compiles with
``build:posix --cxxopt=-std=c++17`` (``.bazelrc`` lines 100-101 at 41398bf), so xla
master only builds against the torch its ``.torch_commit`` pins. A torch_xla compiled
below the standard of torch's headers fails after the whole torch build; this module
says so at planning time, with the commands that work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.errors import ConfigError
from builder.source.refs import ResolvedRef

# where each side states its standard (paths in the repository at the commit)
TORCH_CXX_FILES = ("CMakeLists.txt", "torch/csrc/api/include/torch/all.h")
XLA_CXX_FILE = ".bazelrc"

# set(CMAKE_CXX_STANDARD 17) or upstream's multi-line set(CMAKE_CXX_STANDARD\n    17\n    CACHE ...)
_CMAKE_STANDARD = re.compile(r"set\(\s*CMAKE_CXX_STANDARD\s+(\d+)\b")
_HEADER_GUARD = re.compile(r"#\s*error\s+\"?C\+\+(\d+) or later")
# build --cxxopt=-std=c++17, build:posix --cxxopt=-std=gnu++17 (host_cxxopt is the host tools')
_BAZEL_STD = re.compile(r"^build(?::(?:posix|linux))?\s+.*--cxxopt=['\"]?-std=(?:c|gnu)\+\+(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class CxxPair:
    torch: int | None  # the standard torch's headers need (None: not stated in its files)
    xla: int | None  # the standard xla compiles with


def torch_standard(texts: dict[str, str]) -> int | None:
    """The highest standard torch's files ask for: CMake's CMAKE_CXX_STANDARD and the
    ``#error C++NN or later`` guard of its public header (pure)."""
    found = [int(m) for text in texts.values() for pattern in (_CMAKE_STANDARD, _HEADER_GUARD)
             for m in pattern.findall(text or "")]
    return max(found) if found else None


def xla_standard(bazelrc: str) -> int | None:
    """The standard of xla's ``--cxxopt=-std=`` in .bazelrc: the last build line that sets
    one wins, as later options do in Bazel (pure)."""
    found = _BAZEL_STD.findall(bazelrc or "")
    return int(found[-1]) if found else None


def where(ref: ResolvedRef) -> str:
    return f"{ref.ref} ({ref.sha[:12]})"


def standards_note(pair: CxxPair, torch: ResolvedRef, xla: ResolvedRef) -> str:
    """The warning when one side states no standard: the plan goes on."""
    unknown = [w for w, s in ((f"torch {where(torch)}", pair.torch), (f"xla {where(xla)}", pair.xla)) if s is None]
    return (f"C++ standard not stated by {' or '.join(unknown)} ({', '.join(TORCH_CXX_FILES)} / {XLA_CXX_FILE}): "
            "the pair is not checked; a mismatch would fail at compile time")


def check_standards(pair: CxxPair, torch: ResolvedRef, xla: ResolvedRef, last_release: str) -> None:
    """Refuse an xla that compiles below the standard torch's headers need (exit 2), naming
    both commits, both standards and the commands that build. ``--torch-unpinned`` does not
    lift it: it overrides the pin, not the compiler."""
    if pair.torch is None or pair.xla is None or pair.xla >= pair.torch:
        return
    raise ConfigError(
        f"torch {where(torch)} needs C++{pair.torch} ({TORCH_CXX_FILES[0]}, its headers), but xla {where(xla)} "
        f"compiles with C++{pair.xla} ({XLA_CXX_FILE}): this pair cannot be compiled, --torch-unpinned or not",
        f"build torch alone (builder wheels --torch {torch.ref}), xla with the torch it pins "
        f"(builder wheels --xla {xla.ref}), or a release pair (builder wheels --torch {last_release} "
        f"--xla {last_release})")
