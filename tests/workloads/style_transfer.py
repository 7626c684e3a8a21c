"""Neural style transfer by optimising the image itself (Gatys et al. 2016, "Image Style Transfer
Using Convolutional Neural Networks"; after the PyTorch "Neural Transfer" tutorial, with a small
frozen random CNN standing in for VGG-19).

The only trainable tensor is the input image (a plain leaf tensor, not a module parameter); the CNN is
frozen (`requires_grad_(False)`, eval mode). Content loss on deep features, style loss on Gram
matrices of two layers, Adam 0.03 on the pixels with clamping to [0, 1]. The health metric is the
weighted total loss (`loss`, lower is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import smooth_images
from torch import nn, optim


def gram_matrix(x: torch.Tensor) -> torch.Tensor:
    b, c, h, w = x.size()
    features = x.view(b, c, h * w)
    return features @ features.transpose(1, 2) / (c * h * w)


class FeatureNet(nn.Module):
    """A small random CNN; `forward` returns the activations the losses read."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        f1 = F.relu(self.conv1(x))
        f2 = F.relu(self.conv2(F.avg_pool2d(f1, 2)))
        f3 = F.relu(self.conv3(F.avg_pool2d(f2, 2)))
        return [f1, f2, f3]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--style-weight", type=float, default=1e6)
    parser.add_argument("--content-weight", type=float, default=1e3)
    parser.add_argument("--lr", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    content_img = torch.cat([smooth_images(1, 32, seed=s) for s in (1, 2, 3)], dim=1)
    stripes = (torch.sin(torch.arange(32).float() * 1.3) > 0).float()
    style_img = torch.stack(
        [stripes[None, :].expand(32, 32), stripes[:, None].expand(32, 32), content_img[0, 0]]
    )[None]

    cnn = FeatureNet().eval()
    cnn.requires_grad_(False)
    with torch.no_grad():
        content_target = cnn(content_img)[2]
        style_targets = [gram_matrix(f) for f in cnn(style_img)[:2]]

    input_img = content_img.clone().requires_grad_(True)
    optimizer = optim.Adam([input_img], lr=args.lr)
    for step in range(1, args.steps + 1):
        optimizer.zero_grad()
        features = cnn(input_img)
        content_loss = F.mse_loss(features[2], content_target)
        style_loss = torch.stack(
            [F.mse_loss(gram_matrix(f), t) for f, t in zip(features[:2], style_targets, strict=True)]
        ).sum()
        loss = args.content_weight * content_loss + args.style_weight * style_loss
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            input_img.clamp_(0, 1)
        print(
            f"step {step} loss={loss.item():.4e} content={content_loss.item():.4e} style={style_loss.item():.4e}"
        )


if __name__ == "__main__":
    main()
