"""Streaming next-step forecaster with a GRU.

The series is long, so it is cut into consecutive chunks and the hidden state
is carried from one chunk to the next -- without cutting its graph. The second
chunk's loss.backward() raises:

    RuntimeError: Trying to backward through the graph a second time ...

`gradguard check examples/` reports GG101 on the line that carries the state.
"""
import torch
from torch import nn


class Forecaster(nn.Module):
    def __init__(self, n_features=2, hidden_size=16):
        super().__init__()
        self.gru = nn.GRU(n_features, hidden_size, batch_first=True)
        self.head = nn.Linear(hidden_size, n_features)

    def forward(self, x, hidden):
        out, hidden = self.gru(x, hidden)
        return self.head(out), hidden


def chunks(series, length):
    """Consecutive (input, next-step target) windows."""
    for start in range(0, series.size(1) - length, length):
        yield series[:, start:start + length], series[:, start + 1:start + 1 + length]


def train(model, series, epochs=2, chunk_len=8, lr=1e-2):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.MSELoss()
    for epoch in range(epochs):
        hidden = torch.zeros(1, series.size(0), model.gru.hidden_size)  # 每个 epoch 重新初始化
        for x, y in chunks(series, chunk_len):
            pred, hidden = model(x, hidden)  # 隐状态跨批次传递
            loss = loss_fn(pred, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    t = torch.linspace(0, 20, 65)
    series = torch.stack([torch.sin(t), torch.cos(t)], dim=-1).expand(4, -1, -1).contiguous()
    train(Forecaster(), series)
