"""A small GAN on 2-D points whose discriminator step scores the generator's
output without .detach().

lossD.backward() back-propagates into the generator as well and frees its part
of the graph; the generator step then runs lossG.backward() through `fake`
again and stops in the very first iteration with "Trying to backward through
the graph a second time".

`gradguard check examples/` reports GG103 on the generator's backward(); the
preferred fix keeps the graph for it (retain_graph=True on lossD.backward()),
and the other fix scores fake.detach() in the discriminator step.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
latent, batch = 8, 64

# 生成器把噪声映射成二维点，判别器区分真假
G = nn.Sequential(nn.Linear(latent, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
optD = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
ones, zeros = torch.ones(batch, 1), torch.zeros(batch, 1)

for step in range(200):
    real = torch.randn(batch, 2) * 0.5 + torch.tensor([2.0, -1.0])
    fake = G(torch.randn(batch, latent))

    optD.zero_grad()
    lossD = bce(D(real), ones) + bce(D(fake), zeros)
    lossD.backward()
    optD.step()

    optG.zero_grad()
    lossG = bce(D(fake), ones)
    lossG.backward()
    optG.step()

    if step % 50 == 0:
        print(f"step {step}: lossD {lossD.item():.3f}  lossG {lossG.item():.3f}")
