import torch

from lmblocks import LMConfig, TransformerLM
from lmblocks.hooks import ActivationStats, gradient_norms


def test_activation_stats_and_gradient_norms():
    model = TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=1, max_seq_len=16))
    ids = torch.randint(0, 20, (2, 8))
    with ActivationStats(model, include=("ffn.fc_in", "attn.o_proj")) as stats:
        loss = model(ids, labels=ids).loss
    assert set(stats.stats) == {"blocks.0.ffn.fc_in", "blocks.0.attn.o_proj"}
    assert "blocks.0.ffn.fc_in" in stats.table()
    loss.backward()
    norms = gradient_norms(model)
    assert "blocks.0.ffn.fc_out.weight" in norms and all(v >= 0 for v in norms.values())
