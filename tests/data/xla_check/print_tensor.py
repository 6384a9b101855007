"""Prints a device tensor every step: a host read per step."""
import torch, torch_xla
device = torch_xla.device()
w = torch.ones(3, device=device)
for i in range(4):
    w = w * 2
    print(w)
    torch_xla.sync()
# ruff: noqa  (kept exactly as run for the captured print_tensor.log: its line numbers are in it)
