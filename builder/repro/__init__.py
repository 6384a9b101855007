"""Reproducibility: the lock file, provenance manifests, wheel normalization."""
