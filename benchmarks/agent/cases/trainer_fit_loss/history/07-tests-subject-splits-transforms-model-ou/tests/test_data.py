import torch

from hartrack.data import make_recordings, subject_split
from hartrack.data.transforms import build_transforms


def test_recordings_shapes_and_ranges():
    rec = make_recordings(n_subjects=3, windows_per_subject=10, seed=1)
    assert rec.x.shape == (30, 6, 128)
    assert 40 < float(rec.hr.min()) and float(rec.hr.max()) < 200
    assert set(rec.subject.tolist()) == {0, 1, 2}


def test_subject_split_is_disjoint():
    rec = make_recordings(n_subjects=8, windows_per_subject=5, seed=0)
    tr, va, te = subject_split(rec.subject, 2, 2, seed=0)
    s = [set(rec.subject[i].tolist()) for i in (tr, va, te)]
    assert not (s[0] & s[1]) and not (s[0] & s[2]) and not (s[1] & s[2])
    assert len(tr) + len(va) + len(te) == 40


def test_transforms_keep_shape():
    t = build_transforms(["jitter", "scale", "rotate", "shift"])
    x = torch.randn(6, 128)
    assert t(x, torch.Generator().manual_seed(0)).shape == (6, 128)
