"""Moves each batch with .to(device) and never syncs: the whole loop becomes one graph."""
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
print("final", loss.item())
# ruff: noqa  (kept exactly as run for the captured no_sync.log: its line numbers are in it)
