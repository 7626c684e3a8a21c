"""Mean teacher for semi-supervised classification (Tarvainen & Valpola 2017, "Mean teachers are
better role models"; loop after the paper's reference PyTorch implementation, written anew).

A student MLP learns from 100 labelled examples (cross-entropy) and from all examples through a
consistency loss: the MSE between its softmax and the teacher's softmax on differently noised inputs.
The teacher is a copy of the student that no optimizer sees and no gradient reaches; after each step
its weights become an exponential moving average of the student's (alpha ramps up to 0.99). Adam 3e-3.
The health metric is the teacher's held-out accuracy (`teacher_acc`, higher is better).
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from synthetic import accuracy, template_images
from torch import nn, optim


def create_model() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 10)
    )  # fmt: skip


def update_ema_variables(model: nn.Module, ema_model: nn.Module, alpha: float, global_step: int) -> None:
    alpha = min(1 - 1 / (global_step + 1), alpha)  # use the true average until the EMA is warm
    with torch.no_grad():
        for ema_param, param in zip(ema_model.parameters(), model.parameters(), strict=True):
            ema_param.mul_(alpha).add_(param, alpha=1 - alpha)


def noisy(x: torch.Tensor) -> torch.Tensor:
    return x + 0.2 * torch.randn_like(x)


EmaUpdate = Callable[[nn.Module, nn.Module, float, int], None]


def main(argv: list[str] | None = None, update_ema_variables: EmaUpdate = update_ema_variables) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--labelled", type=int, default=100)
    parser.add_argument("--ema-decay", type=float, default=0.99)
    parser.add_argument("--consistency", type=float, default=10.0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y = template_images(4096, seed=1)
    test_x, test_y = template_images(512, seed=2)
    model = create_model()
    ema_model = copy.deepcopy(model)
    ema_model.requires_grad_(False)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    def test(step: int) -> None:
        model.eval()
        ema_model.eval()
        with torch.no_grad():
            student_acc, teacher_acc = accuracy(model(test_x), test_y), accuracy(ema_model(test_x), test_y)
        print(f"eval {step} teacher_acc={teacher_acc:.4f} student_acc={student_acc:.4f}")
        model.train()
        ema_model.train()

    test(0)
    for step in range(1, args.steps + 1):
        labelled = torch.randint(0, args.labelled, (args.batch_size // 2,))
        unlabelled = torch.randint(args.labelled, len(x), (args.batch_size,))
        batch = x[torch.cat([labelled, unlabelled])]
        student_out = model(noisy(batch))
        with torch.no_grad():
            teacher_out = ema_model(noisy(batch))
        class_loss = F.cross_entropy(student_out[: len(labelled)], y[labelled])
        weight = args.consistency * min(1.0, step / 20)
        consistency_loss = F.mse_loss(F.softmax(student_out, dim=1), F.softmax(teacher_out, dim=1))
        loss = class_loss + weight * consistency_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        update_ema_variables(model, ema_model, args.ema_decay, step)
        print(
            f"step {step} loss={loss.item():.4f} class_loss={class_loss.item():.4f} consistency={consistency_loss.item():.5f}"
        )
    test(args.steps)


if __name__ == "__main__":
    main()
