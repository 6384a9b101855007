"""The local package index (PEP 503/691 directory), fetching into it, uploads, serving, wheel metadata."""
