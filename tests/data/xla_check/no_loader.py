"""Syncs every step but moves each batch with .to(device) instead of MpDeviceLoader."""
import torch
import torch_xla
STEPS = 6
device = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(8, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.MSELoss()
batches = [(torch.randn(4, 8), torch.randn(4, 2)) for _ in range(STEPS)]
for x, y in batches:
    x, y = x.to(device), y.to(device)
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    torch_xla.sync()
print("done")
# ruff: noqa  (kept exactly as run for the captured no_loader.log: its line numbers are in it)
