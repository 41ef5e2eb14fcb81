# gradguard-fixture
# runtime: train
# expect: GG206@20
# model.eval() for validation and never model.train() again: from the second epoch on
# dropout is off while training (GG206; torch-preflight's TG011 asks the same question).
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
train_loader = [(torch.randn(3, 4), torch.randn(3, 1)) for _ in range(3)]
val_loader = [(torch.randn(3, 4), torch.randn(3, 1)) for _ in range(2)]

for epoch in range(2):
    for x, y in train_loader:
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        val = sum(float(((model(x) - y) ** 2).mean()) for x, y in val_loader)
