"""The batch size changes every step: every step is a new graph shape, so XLA recompiles."""
import torch
import torch_xla
from torch_xla.distributed.parallel_loader import MpDeviceLoader

STEPS = 6
device = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(8, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.MSELoss()
batches = [(torch.randn(step + 1, 8), torch.randn(step + 1, 2)) for step in range(STEPS)]

for x, y in MpDeviceLoader(batches, device):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    torch_xla.sync()
print("trained", STEPS, "steps")
