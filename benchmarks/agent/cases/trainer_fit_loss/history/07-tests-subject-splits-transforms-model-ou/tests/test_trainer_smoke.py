from hartrack.config import load_config
from hartrack.engine import Trainer


def test_two_epochs_on_a_tiny_setup(tmp_path):
    cfg = load_config(
        None,
        [
            "data.n_subjects=8",
            "data.windows_per_subject=20",
            "data.val_subjects=2",
            "data.test_subjects=2",
            "model.backbone=tinycnn",
            'model.backbone_args={"width": 16}',
            "train.epochs=2",
            f"train.out_dir={tmp_path}",
        ],
    )
    test = Trainer(cfg, log=lambda s: None).fit()
    assert 0.0 <= test["acc"] <= 1.0 and test["hr_mae"] > 0
    assert (tmp_path / "best.pt").exists()
