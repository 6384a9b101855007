# As pytorch/xla bazel/dependencies.bzl (master 41398bf): xla is checked out at
# pytorch/xla, inside a torch checkout.
PYTORCH_LOCAL_DIR = "../"
