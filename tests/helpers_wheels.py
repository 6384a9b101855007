"""Small real wheels for tests and benchmarks: a zip with a proper .dist-info.

``make_wheel`` writes a wheel pip can install (METADATA, WHEEL, RECORD with hashes)
so tests exercise the same files a build produces, not mocks.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zipfile
from pathlib import Path

_CHUNK = 1024 * 1024


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def make_wheel(
    directory: Path | str,
    name: str,
    version: str,
    requires_python: str | None = None,
    size: int = 0,
    payload: bytes = b"",
    tag: str = "py3-none-any",
    requires: tuple[str, ...] = (),
) -> Path:
    """Write ``<name>-<version>-<tag>.whl`` into ``directory`` and return its path.

    ``name`` keeps its spelling in METADATA (``Foo_Bar``), with ``-`` escaped to ``_`` in
    the file name as PEP 427 asks. ``payload`` goes into the package's ``data.bin``;
    ``size`` adds that many random (incompressible) bytes, stored uncompressed, so a
    benchmark can make a wheel of a known size quickly.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    dist = re.sub(r"[^A-Za-z0-9.]+", "_", name)
    module = re.sub(r"[^A-Za-z0-9]+", "_", name).lower()
    dist_info = f"{dist}-{version}.dist-info"
    path = directory / f"{dist}-{version}-{tag}.whl"

    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        metadata += f"Requires-Python: {requires_python}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    metadata += "Summary: a test wheel made by tests/helpers_wheels.py\n\n"
    wheel_file = "Wheel-Version: 1.0\nGenerator: helpers_wheels\nRoot-Is-Purelib: true\n"
    for t in _expand_tags(tag):
        wheel_file += f"Tag: {t}\n"
    files: list[tuple[str, bytes]] = [
        (f"{module}/__init__.py", f"__version__ = {version!r}\n".encode()),
        (f"{module}/data.bin", payload),
        (f"{dist_info}/METADATA", metadata.encode()),
        (f"{dist_info}/WHEEL", wheel_file.encode()),
    ]
    record_lines = [f"{arc},{_record_hash(data)},{len(data)}" for arc, data in files]

    tmp = path.with_name(path.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arc, data in files:
            zf.writestr(arc, data)
        if size:
            arc = f"{module}/random.bin"
            digest = hashlib.sha256()
            info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            with zf.open(info, "w", force_zip64=size > 2**31) as fh:
                left = size
                while left:
                    chunk = os.urandom(min(_CHUNK, left))
                    digest.update(chunk)
                    fh.write(chunk)
                    left -= len(chunk)
            b64 = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
            record_lines.append(f"{arc},sha256={b64},{size}")
        record_lines.append(f"{dist_info}/RECORD,,")
        zf.writestr(f"{dist_info}/RECORD", "\n".join(record_lines) + "\n")
    os.replace(tmp, path)
    return path


def _expand_tags(tag: str) -> list[str]:
    py, abi, plat = tag.split("-")
    return [f"{p}-{a}-{q}" for p in py.split(".") for a in abi.split(".") for q in plat.split(".")]
