"""Reads the loss on the host every step (`.item()`): a device-to-host sync per step."""
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

total = 0.0
for x, y in MpDeviceLoader(batches, device):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    total += loss.item()
    torch_xla.sync()
print("mean loss", total / STEPS)
