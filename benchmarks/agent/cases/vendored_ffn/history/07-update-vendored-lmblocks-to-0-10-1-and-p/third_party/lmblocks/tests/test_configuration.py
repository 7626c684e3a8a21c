import pytest

from lmblocks import LMConfig, preset


def test_gated_hidden_width_is_rounded():
    cfg = LMConfig(d_model=100, n_heads=4, ffn_type="swiglu", ffn_multiple_of=32)
    assert cfg.ffn_hidden % 32 == 0 and cfg.ffn_hidden >= 2 * 4 * 100 / 3


def test_old_field_names_are_read():
    cfg = LMConfig.from_dict({"n_embd": 64, "n_layer": 3, "n_head": 4, "block_size": 32, "mlp_ratio": 2.0})
    assert (cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.max_seq_len, cfg.ffn_mult) == (64, 3, 4, 32, 2.0)


@pytest.mark.parametrize(
    "bad",
    [
        {"ffn_type": "mystery"},
        {"d_model": 30, "n_heads": 4},
        {"n_heads": 6, "n_kv_heads": 4, "d_model": 48},
        {"parallel_residual": True, "pre_norm": False},
        {"dropout": 1.0},
    ],
)
def test_invalid_configs(bad):
    with pytest.raises(ValueError):
        LMConfig(**bad)


def test_presets_combine():
    cfg = preset("nano+llama-like", vocab_size=99)
    assert cfg.d_model == 128 and cfg.ffn_type == "swiglu" and cfg.vocab_size == 99
    with pytest.raises(KeyError):
        preset("huge")


def test_save_load(tmp_path):
    cfg = LMConfig(d_model=64, n_heads=4, extra={"note": "x"})
    cfg.save(tmp_path / "c.json")
    assert LMConfig.load(tmp_path / "c.json") == cfg
