"""Super-resolution with an efficient sub-pixel convolution network (Shi et al. 2016; after
pytorch/examples super_resolution, with fewer channels).

Four convolutions (orthogonal init with the ReLU gain) and `PixelShuffle(2)` upscale 8x8 inputs to
16x16; the inputs are average-pooled versions of synthetic smooth images. MSE loss, Adam 1e-3. The
health metric is held-out PSNR (`psnr`, higher is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import psnr, smooth_images
from torch import nn, optim
from torch.nn import init


class Net(nn.Module):
    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 32, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(32, 32, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(32, 16, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(16, upscale_factor**2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    train_hr, test_hr = smooth_images(2048, 16, seed=1), smooth_images(256, 16, seed=2)
    train_lr, test_lr = F.avg_pool2d(train_hr, 2), F.avg_pool2d(test_hr, 2)
    model = Net(upscale_factor=2)
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    def test(step: int) -> None:
        with torch.no_grad():
            print(f"eval {step} psnr={psnr(model(test_lr).clamp(0, 1), test_hr):.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(train_hr), (args.batch_size,))
        optimizer.zero_grad()
        loss = criterion(model(train_lr[idx]), train_hr[idx])
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.6f}")
    test(args.steps)


if __name__ == "__main__":
    main()
