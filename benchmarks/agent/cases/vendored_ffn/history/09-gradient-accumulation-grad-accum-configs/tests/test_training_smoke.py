from pathlib import Path

from charlm.config import load_config
from charlm.data import prepare_data
from charlm.model import build_model
from charlm.trainer import train

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_debug_config_trains_and_saves(tmp_path):
    cfg = load_config(CONFIGS / "debug.json", [f"data_dir={tmp_path / 'data'}", f"out_dir={tmp_path / 'run'}",
                                                '{"n_people": 8, "train_sentences": 300, "val_sentences": 40, "seed": 0}'.join(["corpus=", ""])])
    data = prepare_data(cfg.data_dir, cfg.seq_len, cfg.corpus)
    model = build_model(cfg, data.tokenizer.vocab_size)
    result = train(cfg, model, data, quiet=True)
    assert result.val_loss < 5.0
    assert (tmp_path / "run" / "model" / "model.pt").exists()
