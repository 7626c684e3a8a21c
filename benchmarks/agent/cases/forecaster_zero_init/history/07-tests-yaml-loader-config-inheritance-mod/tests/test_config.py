from pathlib import Path

import pytest

from patchcast.config import load_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_inheritance_and_overrides():
    cfg = load_config(CONFIGS / "ablation_mlp_only.yaml", ["train.epochs=2", "model.d_model=32"])
    assert cfg.name == "ablation_mlp_only"
    assert cfg.model.use_attention is False
    assert cfg.model.n_layers == 2  # from synth_patchtst.yaml
    assert cfg.data.params["n_channels"] == 8  # from base.yaml
    assert cfg.train.epochs == 2 and cfg.model.d_model == 32


def test_unknown_keys_are_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model:\n  d_modle: 3\n")
    with pytest.raises(ValueError, match="d_modle"):
        load_config(path)


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_every_config_loads(name):
    load_config(CONFIGS / name)
