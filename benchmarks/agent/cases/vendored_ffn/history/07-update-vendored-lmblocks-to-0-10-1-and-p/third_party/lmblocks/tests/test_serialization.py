import torch

from lmblocks import LMConfig, TransformerLM, load_pretrained, save_pretrained
from lmblocks.serialization import convert_v1_state_dict


def test_round_trip(tmp_path):
    model = TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_seq_len=16))
    save_pretrained(model, tmp_path / "m")
    loaded = load_pretrained(tmp_path / "m")
    ids = torch.randint(0, 20, (1, 8))
    assert torch.allclose(model(ids).logits, loaded(ids).logits)


def test_v1_names_are_converted():
    cfg = LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=1, max_seq_len=16)
    old = {
        "wte.weight": torch.zeros(20, 32),
        "blocks.0.ln_1.weight": torch.ones(32),
        "blocks.0.attn.c_attn.weight": torch.randn(96, 32),
        "blocks.0.mlp.c_fc.weight": torch.zeros(128, 32),
        "ln_f.weight": torch.ones(32),
    }
    new = convert_v1_state_dict(old, cfg)
    assert set(new) == {
        "tok_emb.weight",
        "blocks.0.norm_attn.weight",
        "blocks.0.attn.q_proj.weight",
        "blocks.0.attn.k_proj.weight",
        "blocks.0.attn.v_proj.weight",
        "blocks.0.ffn.fc_in.weight",
        "norm_out.weight",
    }
    assert torch.equal(new["blocks.0.attn.k_proj.weight"], old["blocks.0.attn.c_attn.weight"][32:64])
