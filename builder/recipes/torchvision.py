"""torchvision: a setup.py that builds C++ ops with torch.utils.cpp_extension against
the torch of this run (or of the index).

Followed (docs/upstream.md lists each item with its source):
- pytorch/vision ``setup.py`` @004ebb5c (2026): ``import torch`` at the top, so the build
  needs that torch installed and no build isolation; ``torchvision._C`` and
  ``torchvision.image`` are ``CppExtension``s (``CUDAExtension`` when FORCE_CUDA=1 or a
  CUDA torch sees a GPU), ``build_ext = BuildExtension.with_options(no_python_abi_suffix=True)``;
  the version is ``version.txt`` + ``+<sha7>``, or BUILD_VERSION whole; PYTORCH_VERSION pins
  the wheel's torch requirement; TORCHVISION_USE_PNG/JPEG/WEBP/NVJPEG default to on and fall
  back (with a warning) when the library is not found. The video knobs of older releases
  (TORCHVISION_USE_VIDEO_CODEC, TORCHVISION_USE_FFMPEG) are gone from this setup.py.
- ``pyproject.toml`` @5eb61f54: ``[build-system] requires = ["setuptools", "torch", "wheel"]``
  with no backend (setuptools' legacy backend). "torch" there is what BuildContext.against
  installs from the local index, never PyPI (``deps_layer_requirements``).
- pytorch/test-infra ``build_wheels_linux.yml`` (torchvision's wheel workflow): torch is
  installed first (PIP_INSTALL_TORCH), then ``python setup.py bdist_wheel`` in that env;
  ``tools/pkg-helpers/.../version.py`` exports BUILD_VERSION. builder runs the PEP 517 form
  of the same build, ``python -m build --wheel --no-isolation``.

Choices for a CPU build in builder's image:
- FORCE_CUDA=0 and every image codec off: the toolchain image has no libpng/libjpeg/libwebp
  headers, and upstream would otherwise probe /usr/include and libpng-config and decide per
  machine; switching them off makes the wheel the same whatever a later image holds.
- PYTORCH_VERSION: the version of the torch this build installs (``ctx.against``), as
  upstream's release jobs pin it: the wheel requires the torch its C++ was compiled against.
- CC=gcc, CXX=g++: Python's sysconfig names x86_64-linux-gnu-g++ (absent from the image) for
  setuptools' link step; cpp_extension reads CXX for its ninja file.
- ccache: torch >= 2.13's cpp_extension prepends ``ccache`` to the ninja compiler itself when
  ccache is on PATH (``_wrap_compiler``); older torch does not, and the image's
  /usr/lib/ccache holds only versioned names (gcc-12, g++-12). So the script puts a
  masquerade dir of its own first on PATH (``ccache_masquerade_lines``, as the extension
  recipe does): every compile goes through ccache with either torch, and torch 2.13's
  ``ccache g++`` resolves g++ past the link (ccache skips itself). Measured in builder's
  image with the fixture: a change to one of its four .cpp files gives 3 direct hits, 1 miss.
- no ``example``: ``builder demo`` builds against faketorch, which has no cpp_extension.
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from builder.errors import BuildError
from builder.recipes.base import BuildContext, Recipe, ccache_masquerade_lines
from builder.source.mirror import read_at_commit

IMAGE_CODECS = ("TORCHVISION_USE_PNG", "TORCHVISION_USE_JPEG", "TORCHVISION_USE_WEBP", "TORCHVISION_USE_NVJPEG")


def pinned_version(against: tuple[str, ...], project: str) -> str:
    """The version ``project==VERSION`` names in ``against`` ("" when it is not pinned there)."""
    for text in against:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        specs = list(req.specifier)
        if canonicalize_name(req.name) == canonicalize_name(project) and len(specs) == 1 \
                and specs[0].operator == "==":
            return specs[0].version
    return ""


class TorchvisionRecipe(Recipe):
    name = "torchvision"
    project = "torchvision"
    default_repo = "https://github.com/pytorch/vision.git"
    import_name = "torchvision"
    builds_against = ("torch",)
    version_env = "BUILD_VERSION"

    def release_base(self, mirror: Path, sha: str) -> str:
        """``version.txt`` at ``sha`` (0.26.0a0 on main): what setup.py's get_version() reads and
        test-infra's pkg-helpers date a nightly from."""
        text = (read_at_commit(mirror, sha, "version.txt") or "").strip()
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)+[A-Za-z0-9.]*", text):
            raise BuildError(f"cannot read version.txt at {sha[:12]}",
                             "a torchvision tree carries version.txt at its root")
        return text

    def env(self, ctx: BuildContext) -> dict[str, str]:
        env = {
            "FORCE_CUDA": "0",
            **{knob: "0" for knob in IMAGE_CODECS},
            "MAX_JOBS": str(ctx.jobs),
            "CC": "gcc",
            "CXX": "g++",
            "SOURCE_DATE_EPOCH": str(ctx.source_date_epoch),
        }
        torch_version = pinned_version(ctx.against, "torch")
        if torch_version:
            env["PYTORCH_VERSION"] = torch_version
        if ctx.version:
            env["BUILD_VERSION"] = ctx.version
        env.update(ctx.extra_env)
        return env

    def prepare_lines(self, ctx: BuildContext) -> list[str]:
        return [*ccache_masquerade_lines(), *super().prepare_lines(ctx)]

    def smoke_code(self) -> str:
        # nms runs C++ from _C.so (registered through TORCH_LIBRARY): proves the library loads
        # against the installed torch, not only that the Python package imports
        return (
            "import torch, torchvision\n"
            "print('torch', torch.__version__, 'torchvision', torchvision.__version__)\n"
            "from torchvision.extension import _HAS_OPS\n"
            "assert _HAS_OPS, 'torchvision._C did not load'\n"
            "boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 11., 11.], [50., 50., 60., 60.]])\n"
            "keep = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)\n"
            "assert keep.tolist() == [0, 2], keep\n"
            "print('torchvision.ops.nms kept', keep.tolist())\n"
        )
