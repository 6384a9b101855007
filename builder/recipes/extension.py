"""A torch extension configured in builder.toml (``[packages.NAME]``): one recipe for any
package whose setup.py builds C++ through ``torch.utils.cpp_extension``.

What it sets, and why:
- the table's ``env``: the package's own knobs. torch-spline-conv 1.2.2's setup.py (the
  sdist on PyPI; rusty1s/pytorch_spline_conv) reads FORCE_ONLY_CPU / FORCE_CUDA /
  FORCE_ONLY_CUDA (which kernels: ``suffices``), BUILD_DOCS (no extensions at all) and
  NVCC_FLAGS; torch-scatter / torch-sparse read the same names (torch-sparse adds WITH_METIS).
  Without FORCE_ONLY_CPU a machine without CUDA builds the CPU kernels anyway
  (``torch.cuda.is_available()`` is false), so the knob mostly documents the intent.
- CC=gcc, CXX=g++: Python's sysconfig names the compiler Python itself was built with
  (Debian: x86_64-linux-gnu-gcc); setuptools' distutils reads CC/CXX instead, and torch's
  cpp_extension reads CXX for its ABI check and ninja file.
- MAX_JOBS: cpp_extension's ninja build runs that many compiles. A package that turns
  ninja off (torch-spline-conv: ``BuildExtension.with_options(use_ninja=False)``) compiles
  one file after the other whatever MAX_JOBS says.
- ccache by masquerade: a directory first on PATH whose gcc, g++, cc, c++ are links to
  ccache (ccache, called by a compiler's name, runs the next compiler of that name on
  PATH, skipping links to itself). cpp_extension does not build with CMake, so
  CMAKE_<LANG>_COMPILER_LAUNCHER does nothing here; CXX="ccache g++" breaks it (it treats
  CXX as one program name: shutil.which(CXX) in its compiler check, and its ninja rule
  would run ``ccache 'ccache g++'``). torch >= 2.13 prepends ccache itself
  (``_wrap_compiler``), but in the non-ninja path only to ``compiler_so``, which setuptools'
  distutils no longer uses for C++ sources (``compiler_so_cxx``, setuptools >= 72):
  measured with torch 2.13.0 + setuptools 80.9, torch-spline-conv's compiles ran plain
  ``g++`` and ccache counted nothing. The links are made by the build script rather than
  taken from Debian's /usr/lib/ccache: the toolchain image installs gcc-12/g++-12 with
  gcc/g++ as alternatives, and update-ccache-symlinks only linked the versioned names
  there. The masquerade catches both paths (ninja's ``ccache g++`` resolves g++ past the
  link to the real compiler, so a compile goes through ccache once).
- SOURCE_DATE_EPOCH: the source's time (the commit's, or the sdist's newest member).

docs/upstream.md lists each row with its source. Measured on 2 cores (torch 2.13.0+cpu):
torch-spline-conv 1.2.2 compiles 5 C++ files serially in 264 s cold; warm through ccache
the whole build takes 8 s (5/5 direct hits).
"""

from __future__ import annotations

import re

from builder.errors import ConfigError
from builder.recipes.base import BuildContext, Recipe
from builder.settings import PackageConfig

# compiler-named links to ccache, first on PATH (in the build's HOME: any uid can make it)
CCACHE_MASQUERADE = "$HOME/.ccache-bin"
MASQUERADED = ("gcc", "g++", "cc", "c++")
DEFAULT_BUILDS_AGAINST = ("torch",)


def module_name(project: str) -> str:
    """The import name a project most likely has: torch-spline-conv -> torch_spline_conv."""
    return re.sub(r"[-.]+", "_", project).lower()


class ExtensionRecipe(Recipe):
    """A ``[packages.NAME]`` table turned into a recipe."""

    def __init__(self, name: str, package: PackageConfig) -> None:
        self.name = name
        self.package = package
        self.sdist = package.sdist  # a PyPI project: the source is its sdist (--pkg NAME=VERSION)
        self.project = package.sdist or name
        self.default_repo = package.repo  # or a git repository (--pkg NAME=REF)
        self.import_name = package.import_name or module_name(self.project)
        self.builds_against = (DEFAULT_BUILDS_AGAINST if package.builds_against is None
                               else tuple(package.builds_against))
        self.build_requires = tuple(package.build_requires)

    def __repr__(self) -> str:
        return f"ExtensionRecipe({self.name!r}, {self.package!r})"

    def repo_url(self, cfg) -> str:  # noqa: ANN001 - Config
        if self.sdist and not cfg.repos.get(self.name):
            raise ConfigError(f"[packages.{self.name}] builds the sdist of {self.sdist!r}, not a git repository",
                              f"pass a version: --pkg {self.name}=VERSION")
        return super().repo_url(cfg)

    def env(self, ctx: BuildContext) -> dict[str, str]:
        env = {
            **self.package.env,
            "CC": "gcc",
            "CXX": "g++",
            "MAX_JOBS": str(ctx.jobs),
            "SOURCE_DATE_EPOCH": str(ctx.source_date_epoch),
        }
        env.update(ctx.extra_env)
        return env

    def prepare_lines(self, ctx: BuildContext) -> list[str]:
        # PATH is the image's (its venv first): extended in the script rather than replaced in env
        links = " && ".join(f'ln -sf "$(command -v ccache)" "{CCACHE_MASQUERADE}/{name}"' for name in MASQUERADED)
        return [f'mkdir -p "{CCACHE_MASQUERADE}" && {links}', f'export PATH="{CCACHE_MASQUERADE}:$PATH"',
                *super().prepare_lines(ctx)]

    def smoke_code(self) -> str:
        if self.package.smoke:
            return self.package.smoke
        name = self.import_name
        return (f"import {name}\n"
                f"print({name!r}, getattr({name}, '__version__', ''), 'from', {name}.__file__)\n")
