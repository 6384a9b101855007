"""Reads the loss once, after the training loop: a one-off host read."""
import torch
import torch_xla
from torch_xla.distributed.parallel_loader import MpDeviceLoader

STEPS = 6
device = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(8, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.MSELoss()
batches = [(torch.randn(4, 8), torch.randn(4, 2)) for _ in range(STEPS)]

for x, y in MpDeviceLoader(batches, device):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    torch_xla.sync()
print("final loss", float(loss))
