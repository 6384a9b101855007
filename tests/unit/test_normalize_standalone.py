"""builder.repro.normalize run as the build script runs it: its source on stdin of an
isolated interpreter (``python -I -``), where no builder package can be imported. (Kept
apart from the mutation-tested unit files: mutmut's copy of the module is not standalone.)"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zlib
from pathlib import Path

from builder.repro import normalize
from tests.unit.test_normalize import FILES, NAME, SDE, write_wheel

SOURCE = Path(normalize.__file__).read_text()


def test_the_source_runs_alone_and_records_sha_python_and_zlib(tmp_path):
    raw = write_wheel(tmp_path / "dist" / NAME, list(reversed(FILES)), (2030, 1, 2, 3, 4, 6), 9)
    done = subprocess.run([sys.executable, "-I", "-", str(raw.parent), str(tmp_path), str(SDE)], input=SOURCE,
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / normalize.NORMALIZE_FILE).read_text())
    assert record["wheels"] == {NAME: {"sha256": hashlib.sha256(raw.read_bytes()).hexdigest(),
                                       "entries": len(FILES) + 1}}
    assert record["version"] == normalize.NORMALIZER_VERSION
    assert record["python"] == ".".join(map(str, sys.version_info[:3]))
    assert record["zlib"] == zlib.ZLIB_RUNTIME_VERSION
    assert done.stdout.startswith(f"normalised with Python {record['python']}, zlib {record['zlib']}: {NAME} ")
    assert normalize.layout_problems(raw, SDE) == []
