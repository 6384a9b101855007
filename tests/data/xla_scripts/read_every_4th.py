"""Logs the loss every 4th step, after the sync (3 host reads in 12 steps): periodic, the usual advice."""
import torch
import torch_xla
from torch_xla.distributed.parallel_loader import MpDeviceLoader

STEPS = 12
device = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(8, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.MSELoss()
batches = [(torch.randn(4, 8), torch.randn(4, 2)) for _ in range(STEPS)]

for step, (x, y) in enumerate(MpDeviceLoader(batches, device), 1):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    torch_xla.sync()
    if step % 4 == 0:
        print(f"step {step} loss {float(loss):.4f}")
print("trained", STEPS, "steps")
