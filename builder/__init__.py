"""builder: containerized, reproducible builds of PyTorch and PyTorch/XLA wheels."""

__version__ = "0.1.0"
