from pathlib import Path

import pytest

from charlm.config import load_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_quick_inherits_from_base():
    cfg = load_config(CONFIGS / "quick.json")
    assert cfg.memory.ffn_recompute is True  # from base.json
    assert cfg.model["d_model"] == 64 and cfg.steps == 400


def test_overrides():
    cfg = load_config(CONFIGS / "quick.json", ["steps=7", "model.n_layers=1", "memory.ffn_recompute=false"])
    assert cfg.steps == 7 and cfg.model["n_layers"] == 1 and cfg.memory.ffn_recompute is False


def test_unknown_key(tmp_path):
    (tmp_path / "c.json").write_text('{"stepz": 3}')
    with pytest.raises(ValueError, match="stepz"):
        load_config(tmp_path / "c.json")
