"""Dynamic ``dependencies`` of the torch wheel (a [[tool.dynamic-metadata]] provider).

Follows pytorch/pytorch ``tools/metadata/dependencies.py`` (added by #180247): the
runtime Requires-Dist of a CPU wheel. Upstream's list is filelock, typing-extensions,
sympy, networkx, jinja2, fsspec (and setuptools on Python >= 3.12); the fixture keeps
three small pure-Python ones, so an index that holds only the torch wheel cannot
install it, exactly as with the real one.
"""

from __future__ import annotations

DEPENDENCIES = [
    "filelock",
    "typing-extensions>=4.10.0",
    "fsspec>=0.8.5",
]


def dynamic_metadata(settings, project):  # noqa: ARG001 - the provider protocol
    return {"dependencies": list(DEPENDENCIES)}
