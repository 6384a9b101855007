import torch
import torch_xla
from torch_xla.distributed.parallel_loader import MpDeviceLoader

device = torch_xla.device()
model = torch.nn.Linear(8, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.MSELoss()
batches = [(torch.randn(4, 8), torch.randn(4, 2)) for _ in range(12)]

for step, (x, y) in enumerate(MpDeviceLoader(batches, device), 1):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    if loss > 100:                      # a tensor as a condition: read on the host
        break
    torch_xla.sync()
    if step % 4 == 0:
        print(f"step {step} loss {float(loss):.4f}")
print("final loss", float(loss))
# The README's xla-check example (one finding of each severity); its line numbers are in README.md and train.log
