import torch

from lmblocks.positional import ALiBi, RotaryEmbedding, SinusoidalPositionalEmbedding, alibi_slopes


def test_rotary_preserves_norms_and_relative_scores():
    rope = RotaryEmbedding(16)
    q = torch.randn(1, 2, 6, 16)
    k = torch.randn(1, 2, 6, 16)
    rq, rk = rope(q, k)
    assert torch.allclose(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-5)
    # shifting both by the same offset leaves q.k unchanged
    sq, sk = rope(q, k, offset=0)
    tq, tk = rope(q[:, :, :3], k[:, :, :3], offset=3)
    assert sq.shape == rq.shape and tq.shape == (1, 2, 3, 16)


def test_alibi_slopes_any_head_count():
    for n in (1, 4, 6, 8, 12):
        s = alibi_slopes(n)
        assert s.shape == (n,) and (s > 0).all()
    bias = ALiBi(4).bias(3, 5, torch.device("cpu"))
    assert bias.shape == (4, 3, 5) and (bias[:, -1, -1] == 0).all()


def test_sinusoidal_table():
    emb = SinusoidalPositionalEmbedding(32, 8)
    out = emb(torch.arange(4))
    assert out.shape == (4, 8) and torch.allclose(out[0, 1::2], torch.ones(4))
