"""Knowledge distillation from a frozen teacher (Hinton et al. 2015, "Distilling the Knowledge in a
Neural Network"; loop after the PyTorch "Knowledge Distillation" tutorial).

The teacher (an MLP with batch norm and dropout) is trained first, then frozen: `teacher.eval()`,
`requires_grad_(False)`, and its logits are computed under `torch.no_grad()`. The student (a smaller
MLP) learns from KL(student_T || teacher_T) * T^2 at temperature 4 plus the hard-label cross-entropy,
Adam 3e-3. The health metric is the student's held-out accuracy (`student_acc`, higher is better).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from synthetic import accuracy, template_images
from torch import nn, optim

PIXELS, CLASSES = 256, 10


class Teacher(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(PIXELS, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.3),
            nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, CLASSES),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Student(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(PIXELS, 32), nn.ReLU(), nn.Linear(32, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def train_teacher(teacher: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int = 150) -> None:
    """Stands in for loading a trained checkpoint: a short supervised run before distillation."""
    optimizer = optim.Adam(teacher.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(10)
    for _ in range(steps):
        idx = torch.randint(0, len(x), (128,), generator=g)
        optimizer.zero_grad()
        F.cross_entropy(teacher(x[idx]), y[idx]).backward()
        optimizer.step()


def freeze_teacher(teacher: nn.Module) -> None:
    teacher.eval()
    teacher.requires_grad_(False)


def distillation_loss(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, labels: torch.Tensor, T: float, alpha: float
) -> torch.Tensor:
    soft = F.kl_div(
        F.log_softmax(student_logits / T, dim=-1), F.log_softmax(teacher_logits / T, dim=-1),
        reduction="batchmean", log_target=True,
    )  # fmt: skip
    return alpha * soft * T * T + (1 - alpha) * F.cross_entropy(student_logits, labels)


def main(argv: list[str] | None = None, freeze_teacher: Callable[[nn.Module], None] = freeze_teacher) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=4.0)
    parser.add_argument("--alpha", type=float, default=0.7)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    x, y = template_images(4096, noise=0.3, seed=1)
    test_x, test_y = template_images(512, noise=0.3, seed=2)
    teacher, student = Teacher(), Student()
    train_teacher(teacher, x, y)
    freeze_teacher(teacher)
    optimizer = optim.Adam(student.parameters(), lr=args.lr)

    def test(step: int) -> None:
        student.eval()
        with torch.no_grad():
            student_acc = accuracy(student(test_x), test_y)
            teacher_acc = accuracy(teacher(test_x), test_y)
        print(f"eval {step} student_acc={student_acc:.4f} teacher_acc={teacher_acc:.4f}")
        student.train()

    test(0)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(x), (args.batch_size,))
        with torch.no_grad():
            teacher_logits = teacher(x[idx])
        optimizer.zero_grad()
        loss = distillation_loss(student(x[idx]), teacher_logits, y[idx], args.temperature, args.alpha)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
    test(args.steps)


if __name__ == "__main__":
    main()
