# gradguard-fixture
# runtime: train
# expect: GG205@18
# Gradient accumulation on purpose, but each loss is not divided by the number
# of accumulated batches: the step sees their sum (a hint: no quick fix).
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
accum_steps = 2
data = [(torch.randn(3, 4), torch.randn(3, 1)) for _ in range(6)]

opt.zero_grad()
for i, (x, y) in enumerate(data):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if (i + 1) % accum_steps == 0:
        opt.step()
        opt.zero_grad()
