import torch

from lmblocks import LMConfig, TransformerLM, enable_gradient_checkpointing


def _model(**kw):
    torch.manual_seed(0)
    return TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_seq_len=16, **kw))


def test_tied_embeddings_and_parameter_count():
    model = _model()
    assert model.lm_head.weight is model.tok_emb.weight
    untied = _model(tie_embeddings=False)
    assert untied.num_parameters() == model.num_parameters() + 20 * 32


def test_resize_token_embeddings_keeps_old_rows():
    model = _model()
    old = model.tok_emb.weight.detach().clone()
    model.resize_token_embeddings(25)
    assert model.tok_emb.weight.shape == (25, 32) and torch.equal(model.tok_emb.weight[:20], old)
    assert model.lm_head.weight is model.tok_emb.weight and model.config.vocab_size == 25


def test_hidden_states():
    out = _model()(torch.randint(0, 20, (1, 5)), output_hidden_states=True)
    assert len(out.hidden_states) == 3 and out.hidden_states[-1].shape == (1, 5, 32)


def test_gradient_checkpointing_gives_the_same_gradients():
    ids = torch.randint(0, 20, (2, 8))
    grads = []
    for checkpointing in (False, True):
        model = _model(dropout=0.0)
        enable_gradient_checkpointing(model, checkpointing)
        model(ids, labels=ids).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name, g in grads[0].items():
        assert torch.allclose(g, grads[1][name], atol=1e-6), name


def test_too_long_input_is_rejected():
    model = _model()
    try:
        model(torch.randint(0, 20, (1, 17)))
    except ValueError as exc:
        assert "max_seq_len" in str(exc)
    else:
        raise AssertionError("expected a ValueError")
