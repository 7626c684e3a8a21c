"""GAN-style step: the discriminator's optimizer is zeroed, but the generator's optimizer is stepped.
The generator's gradients keep accumulating from step to step.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.LeakyReLU(0.2), nn.Linear(32, 16))

    def forward(self, z):
        return self.net(z)


def setup():
    torch.manual_seed(0)
    generator = Generator()
    discriminator = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    for p in discriminator.parameters():
        p.requires_grad_(False)  # frozen during the generator step
    g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    z = torch.randn(32, 8)

    def generator_step(g, noise):
        d_opt.zero_grad()  # bug: should be g_opt.zero_grad()
        fake = g(noise)
        loss = F.binary_cross_entropy_with_logits(discriminator(fake), torch.ones(noise.shape[0], 1))
        loss.backward()
        g_opt.step()
        return loss

    return {"model": generator, "batch": z, "step_fn": generator_step, "optimizer": g_opt}
