"""Fast neural style: train a feed-forward image transformation network against a frozen loss network
(Johnson et al. 2016, "Perceptual Losses for Real-Time Style Transfer"; after pytorch/examples
fast_neural_style, with a small frozen random CNN standing in for VGG-16).

The transformer network (strided convolution, a residual block, upsampling with instance norm) is the
only trained module, Adam 1e-3; the loss network (`FeatureNet` of style_transfer.py) is frozen in eval
mode and only carries gradient through to the transformer's output. Content loss on deep features,
style loss on Gram matrices. The health metric is the held-out total loss (`test_loss`, lower is
better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from style_transfer import FeatureNet, gram_matrix
from synthetic import smooth_images
from torch import nn, optim


def rgb_images(n: int, seed: int) -> torch.Tensor:
    return torch.cat([smooth_images(n, 32, seed=seed + 100 * c) for c in range(3)], dim=1)


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.in1 = nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.in2 = nn.InstanceNorm2d(channels, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.in2(self.conv2(F.relu(self.in1(self.conv1(x)))))


class TransformerNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(
            nn.Conv2d(3, 16, 5, padding=2), nn.InstanceNorm2d(16, affine=True), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.InstanceNorm2d(32, affine=True), nn.ReLU(),
        )  # fmt: skip
        self.res = ResidualBlock(32)
        self.up = nn.Sequential(
            nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(32, 16, 3, padding=1),
            nn.InstanceNorm2d(16, affine=True), nn.ReLU(), nn.Conv2d(16, 3, 5, padding=2),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.up(self.res(self.down(x))))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--content-weight", type=float, default=1e3)
    parser.add_argument("--style-weight", type=float, default=1e6)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    train_images, test_images = rgb_images(512, seed=1), rgb_images(16, seed=2)
    stripes = (torch.sin(torch.arange(32).float() * 1.3) > 0).float()
    style_img = torch.stack(
        [stripes[None, :].expand(32, 32), stripes[:, None].expand(32, 32), train_images[0, 0]]
    )
    loss_net = FeatureNet().eval()
    loss_net.requires_grad_(False)
    with torch.no_grad():
        style_grams = [gram_matrix(f) for f in loss_net(style_img[None])[:2]]
    transformer = TransformerNet()
    optimizer = optim.Adam(transformer.parameters(), lr=args.lr)

    def perceptual_loss(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features_y = loss_net(transformer(x))
        with torch.no_grad():
            content_target = loss_net(x)[2]
        content = F.mse_loss(features_y[2], content_target)
        style = torch.stack(
            [
                F.mse_loss(gram_matrix(f), g.expand(x.size(0), -1, -1))
                for f, g in zip(features_y[:2], style_grams, strict=True)
            ]
        ).sum()
        return args.content_weight * content, args.style_weight * style

    def test(step: int) -> None:
        with torch.no_grad():
            content, style = perceptual_loss(test_images)
        print(f"eval {step} test_loss={(content + style).item():.4f}")

    test(0)
    for step in range(1, args.steps + 1):
        x = train_images[torch.randint(0, len(train_images), (args.batch_size,))]
        optimizer.zero_grad()
        content, style = perceptual_loss(x)
        loss = content + style
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f} content={content.item():.4f} style={style.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()
