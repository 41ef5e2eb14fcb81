# gradguard-fixture
# runtime: train
# expect: GG201@25
# A trainer's evaluate() keeps every batch's loss with its graph.
import torch
import torch.nn as nn


class Trainer:
    def __init__(self):
        self.model = nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def fit(self, batches):
        for x, y in batches:
            self.opt.zero_grad()
            ((self.model(x) - y) ** 2).mean().backward()
            self.opt.step()

    def evaluate(self, batches):
        self.model.eval()
        losses = []
        for x, y in batches:
            loss = ((self.model(x) - y) ** 2).mean()
            losses.append(loss)
        self.model.train()
        return sum(float(l) for l in losses) / len(losses)


torch.manual_seed(0)
t = Trainer()
data = [(torch.randn(3, 4), torch.randn(3, 1)) for _ in range(3)]
t.fit(data)
print(t.evaluate(data))
