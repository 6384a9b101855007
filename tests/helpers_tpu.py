"""A small torch_tpu fixture wheel, a fake libtpu, and a static PEP 503 index serving them.

The fixture follows PyPI's ``torch_tpu-0.2.0-cp311-cp311-manylinux_2_31_x86_64.whl``
(sha256 52bacb56e4f7d59d899bfc5f243ab431f0e965a74d71a6f9c67e65f3dc5f41f2, read
2026-12): its tag, ``Root-Is-Purelib: false``, METADATA's ``Requires-Dist`` on torch and
libtpu, ``entry_points.txt`` (``[torch.backends] torch_tpu = torch_tpu._loader:load``),
``torch_tpu/__init__.py`` (install the version-dispatch hook, then ``import libtpu;
libtpu.configure_library_path()``, then ``_loader``), ``torch_tpu/_loader.py`` (autoload
guard, ``import torch``, native glue imported at load) and ``torch_tpu/_versioned_so_loader.py``,
whose selection code (``_RELEASE_TRIPLE``, ``version_suffix``, ``_glue_suffix``,
``discover_built_suffixes``, ``resolve_suffix``) is copied unchanged below. Only the
last step differs: upstream's glues are C++ extensions (``env_2_13_0.so`` exporting
``PyInit_env``) loaded through ``ExtensionProxyLoader``; the fixture's ``*.so`` glues are
Python source loaded with ``SourceFileLoader`` (no compiler, no libtorch), each saying
which torch it was "built" for.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import html
import shutil
import threading
import zipfile
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TAG = "cp311-cp311-manylinux_2_31_x86_64"

VERSIONED_SO_LOADER = r'''
"""Fixture copy of torch_tpu/_versioned_so_loader.py (torch_tpu 0.2.0): the same rule."""
import importlib.abc, importlib.machinery, importlib.metadata, importlib.util, pathlib, re, sys

_INTERNAL_PREFIX = "torch_tpu._internal."
_VERSION_SUFFIX = None

def _parse(suffix):
    return tuple(int(part) for part in suffix.split("_"))

def installed_torch_version():
    version = getattr(sys.modules.get("torch"), "__version__", None)
    if version is not None:
        return str(version)
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None

_RELEASE_TRIPLE = re.compile(
    r"""^v?(\d+)\.(\d+)\.(\d+)
        (?:\.\d+)*
        (?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?
        (?:-\d+|[-_.]?(?:post|rev|r)[-_.]?\d*)?
        (?:[-_.]?dev[-_.]?\d*)?
        (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$
    """, re.VERBOSE | re.IGNORECASE)

def version_suffix(version):
    match = _RELEASE_TRIPLE.match(version)
    return None if match is None else "_".join(match.groups())

def torch_version_suffix():
    version = installed_torch_version()
    return None if version is None else version_suffix(version)

def _glue_suffix(so_name):
    parts = so_name.removesuffix(".so").split("_")
    if len(parts) < 4 or not all(part.isdigit() for part in parts[-3:]):
        return None
    return "_".join(parts[-3:])

def discover_built_suffixes(package_dir):
    return frozenset(s for so in package_dir.rglob("*.so") if (s := _glue_suffix(so.name)) is not None)

def resolve_suffix(running, built):
    if not built:
        return None
    supported = ", ".join(s.replace("_", ".") for s in sorted(built, key=_parse))
    if running is None:
        raise ImportError("torch_tpu could not determine the installed PyTorch version. "
                          f"Extensions are available for PyTorch: {supported}.")
    candidates = [b for b in built if _parse(b) <= _parse(running)]
    if not candidates:
        raise ImportError("torch_tpu has no extension module compatible with PyTorch "
                          f"{running.replace('_', '.')}: it predates the oldest supported release. "
                          f"Extensions are available for PyTorch: {supported}.")
    return max(candidates, key=_parse)

class VersionDispatchFinder(importlib.abc.MetaPathFinder):
    """Upstream's finder, loading the fixture's Python-source glue instead of a C++ one."""
    def find_spec(self, fullname, path, target=None):
        if _VERSION_SUFFIX is None or not fullname.startswith(_INTERNAL_PREFIX):
            return None
        if fullname.endswith(f"_{_VERSION_SUFFIX}"):
            return None
        leaf = fullname.rsplit(".", 1)[-1]
        for entry in path or []:
            glue = pathlib.Path(entry) / f"{leaf}_{_VERSION_SUFFIX}.so"
            if glue.is_file():
                loader = importlib.machinery.SourceFileLoader(fullname, str(glue))
                return importlib.util.spec_from_file_location(fullname, str(glue), loader=loader)
        return None

def install_hook(package_dir):
    global _VERSION_SUFFIX
    resolved = resolve_suffix(torch_version_suffix(), discover_built_suffixes(package_dir))
    if resolved is None:
        return
    _VERSION_SUFFIX = resolved
    if not any(isinstance(f, VersionDispatchFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, VersionDispatchFinder())
'''

INIT = '''"""Fixture torch_tpu (follows torch_tpu 0.2.0's __init__.py)."""
import pathlib
from torch_tpu import _versioned_so_loader
_versioned_so_loader.install_hook(pathlib.Path(__file__).parent)
try:
    import libtpu
    libtpu.configure_library_path()
except ImportError:
    print("libtpu not found.")
from torch_tpu import _loader as _  # noqa: F401
'''

LOADER = '''"""Fixture torch_tpu._loader (follows torch_tpu 0.2.0's: autoload guard, import torch, glue at import)."""
import os
_OLD = os.getenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
import torch  # noqa: E402
from torch_tpu._internal import env  # noqa: E402  (the native glue: the dispatch hook picks it)
from torch_tpu._internal.utils import hardware  # noqa: E402
_LOADED = False

def load():
    global _LOADED
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = _OLD
    if hardware.get_tpu_device_count():
        _LOADED = True
'''

HARDWARE = '''"""Fixture hardware probe: TPUs are PCI devices of Google's vendor id (as upstream's _scan_pci_tpus)."""
import pathlib

def get_tpu_device_count():
    count = 0
    for vendor in pathlib.Path("/sys/bus/pci/devices").glob("*/vendor"):
        try:
            count += vendor.read_text().strip() == "0x1ae0"
        except OSError:
            pass
    return count
'''

LIBTPU = '''"""Fake libtpu: the one function torch_tpu's __init__ calls (the real one points at libtpu.so)."""
__version__ = "@VERSION@"
CONFIGURED = []

def configure_library_path():
    CONFIGURED.append(True)
'''


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write(path: Path, files: dict[str, bytes], dist_info: str) -> Path:
    record = "".join(f"{name},{_hash(data)},{len(data)}\n" for name, data in files.items())
    record += f"{dist_info}/RECORD,,\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 10, 1, 0, 0, 0)), data)
        zf.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(2026, 10, 1, 0, 0, 0)), record)
    return path


def torch_tpu_wheel(directory: Path, version: str, torch_range: str = ">=2.11.0,<=2.15.0",
                    glues: tuple[str, ...] = ("2.11.0", "2.13.0", "2.15.0"), libtpu: str = ">=0.0.90",
                    entry_point: bool = True) -> Path:
    """``torch_tpu-<version>-cp311-cp311-manylinux_2_31_x86_64.whl`` with one glue set per
    version in ``glues`` (``env_2_13_0.so`` ... and an unversioned ``libxla_base.so``)."""
    dist_info = f"torch_tpu-{version}.dist-info"
    metadata = (f"Metadata-Version: 2.1\nName: torch_tpu\nVersion: {version}\nRequires-Python: >=3.11\n"
                f"Requires-Dist: libtpu{libtpu}\nRequires-Dist: torch{torch_range}\n"
                "Summary: fixture of TorchTPU (tests/helpers_tpu.py)\n\n")
    files = {
        "torch_tpu/__init__.py": INIT.encode(),
        "torch_tpu/_versioned_so_loader.py": VERSIONED_SO_LOADER.encode(),
        "torch_tpu/_loader.py": LOADER.encode(),
        "torch_tpu/_internal/__init__.py": b"",
        "torch_tpu/_internal/utils/__init__.py": b"",
        "torch_tpu/_internal/utils/hardware.py": HARDWARE.encode(),
        "torch_tpu/csrc/common/libxla_base.so": b"# unversioned: not a glue\n",
    }
    for glue in glues:
        suffix = glue.replace(".", "_")
        files[f"torch_tpu/_internal/env_{suffix}.so"] = f"BUILT_FOR = {glue!r}\n".encode()
        files[f"torch_tpu/csrc/common/glue_{suffix}/libpywrap_{suffix}_common.so"] = b"# not a glue by name\n"
    files[f"{dist_info}/METADATA"] = metadata.encode()
    files[f"{dist_info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: helpers_tpu\nRoot-Is-Purelib: false\n"
                                   f"Tag: {TAG}\n").encode()
    if entry_point:
        files[f"{dist_info}/entry_points.txt"] = b"[torch.backends]\ntorch_tpu = torch_tpu._loader:load\n"
    return _write(Path(directory) / f"torch_tpu-{version}-{TAG}.whl", files, dist_info)


def libtpu_wheel(directory: Path, version: str = "0.0.90") -> Path:
    dist_info = f"libtpu-{version}.dist-info"
    files = {
        "libtpu/__init__.py": LIBTPU.replace("@VERSION@", version).encode(),
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: libtpu\nVersion: {version}\n\n".encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: helpers_tpu\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    return _write(Path(directory) / f"libtpu-{version}-py3-none-any.whl", files, dist_info)


def truncate(path: Path, keep: float = 0.5) -> bytes:
    """Cut the wheel short (an upload that stopped half way); returns its METADATA, read first."""
    with zipfile.ZipFile(path) as zf:
        metadata = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return metadata


def write_index(root: Path, wheels: list[Path], metadata: dict[str, bytes] | None = None) -> str:
    """A static PEP 503 index of ``wheels`` under ``root`` (simple/, files/), each link with
    its ``#sha256=``; returns its file:// URL (serve ``root`` over HTTP for an http one).
    Every readable wheel gets its METADATA as a PEP 658 file; ``metadata`` gives it for
    one that is not (a truncated upload: PyPI still serves the metadata it extracted)."""
    metadata = dict(metadata or {})
    for wheel in wheels:
        try:
            with zipfile.ZipFile(wheel) as zf:
                member = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
                metadata.setdefault(wheel.name, zf.read(member))
        except (zipfile.BadZipFile, StopIteration):
            pass
    (root / "files").mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        dest = root / "files" / wheel.name
        if wheel.resolve() != dest.resolve():
            shutil.copyfile(wheel, dest)
        projects.setdefault(wheel.name.split("-")[0].replace("_", "-").lower(), []).append(dest)
    simple = root / "simple"
    simple.mkdir(exist_ok=True)
    (simple / "index.html").write_text("<html><body>" + "".join(
        f'<a href="{p}/">{p}</a>' for p in sorted(projects)) + "</body></html>\n")
    for project, files in projects.items():
        (simple / project).mkdir(exist_ok=True)
        links = "".join(_link(f, metadata.get(f.name)) for f in sorted(files))
        (simple / project / "index.html").write_text(f"<html><body>{links}</body></html>\n")
    return simple.as_uri() + "/"


def _link(path: Path, metadata: bytes | None) -> str:
    """One file's anchor; with ``metadata``, PyPI's PEP 658/714 ``.metadata`` beside the
    file (pip then resolves without reading the wheel, as it does on PyPI)."""
    attrs = ""
    if metadata is not None:
        path.with_name(path.name + ".metadata").write_bytes(metadata)
        attrs = f' data-core-metadata="sha256={hashlib.sha256(metadata).hexdigest()}"'
    return (f'<a href="../../files/{html.escape(path.name)}#sha256={hashlib.sha256(path.read_bytes()).hexdigest()}"'
            f'{attrs}>{html.escape(path.name)}</a><br>')


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """``root`` over HTTP on 127.0.0.1 (the standard library's server, in a thread); yields
    the base URL. [prebuilt] index_url takes http(s) URLs only."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join()
