"""Linear regression whose labels are computed from inputs that require grad.

X was created with requires_grad=True and Y is computed from X before the
loop, so Y carries a graph built once; every iteration back-propagates through
it and the second one raises "Trying to backward through the graph a second
time". (The same loop with nn.Conv2d and plain tensors trains fine.)

`gradguard check examples/` reports GG102 on the line that builds Y.
"""
import torch
from torch import nn

torch.manual_seed(0)

X = torch.rand(size=(2, 5), requires_grad=True)
true_w = torch.tensor([1, 2, 3, 4, 5.]).reshape((X.shape[1], -1))
true_b = torch.zeros(X.shape[0]).reshape((-1, 1))
Y = torch.matmul(X, true_w) + true_b
Y += torch.rand(size=Y.shape)

linear1 = nn.Linear(5, 1)
lr = 0.01
for i in range(10):
    Y_hat = linear1(X)
    l = (Y_hat - Y) ** 2
    linear1.zero_grad()
    l.sum().backward()
    linear1.weight.data[:] -= lr * linear1.weight.grad
    if (i + 1) % 2 == 0:
        print(f"epoch {i + 1}, loss {l.sum():.3f}")
