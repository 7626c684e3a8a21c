"""Datasets and subject-wise splits."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset

from hartrack.data.synthetic import Recording, make_recordings
from hartrack.data.transforms import Compose, build_transforms


class IMUDataset(Dataset):
    def __init__(self, rec: Recording, index: torch.Tensor, transform: Compose | None = None, seed: int = 0) -> None:
        self.x = rec.x[index]
        self.activity = rec.activity[index]
        self.hr = rec.hr[index]
        self.subject = rec.subject[index]
        self.transform = transform
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        x = self.x[i]
        if self.transform is not None:
            x = self.transform(x, self.gen)
        return {"x": x, "activity": self.activity[i], "hr": self.hr[i], "subject": self.subject[i]}


def subject_split(subjects: torch.Tensor, val: int, test: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Indices of train/val/test windows with disjoint subjects."""
    ids = torch.unique(subjects)
    order = ids[torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed))]
    if val + test >= len(order):
        raise ValueError(f"{len(order)} subjects cannot give {val} val + {test} test subjects")
    test_ids, val_ids, train_ids = order[:test], order[test : test + val], order[test + val :]
    pick = lambda chosen: torch.nonzero(torch.isin(subjects, chosen)).flatten()  # noqa: E731
    return pick(train_ids), pick(val_ids), pick(test_ids)


@dataclass
class Loaders:
    train: DataLoader
    val: DataLoader
    test: DataLoader
    hr_mean: float
    hr_std: float
    n_classes: int


def build_loaders(cfg) -> Loaders:
    d = cfg.data
    rec = make_recordings(d.n_subjects, d.windows_per_subject, d.seed, d.noise)
    train_idx, val_idx, test_idx = subject_split(rec.subject, d.val_subjects, d.test_subjects, d.seed)
    transform = build_transforms(d.augment)
    train = IMUDataset(rec, train_idx, transform, seed=cfg.train.seed)
    gen = torch.Generator().manual_seed(cfg.train.seed)
    return Loaders(
        train=DataLoader(train, batch_size=d.batch_size, shuffle=True, generator=gen, drop_last=True),
        val=DataLoader(IMUDataset(rec, val_idx), batch_size=256),
        test=DataLoader(IMUDataset(rec, test_idx), batch_size=256),
        hr_mean=float(train.hr.mean()),
        hr_std=float(train.hr.std()),
        n_classes=int(rec.activity.max()) + 1,
    )
