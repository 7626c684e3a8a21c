import copy

import torch

from lmblocks import LMConfig, TransformerLM
from lmblocks.beam_search import beam_search
from lmblocks.encoder import TransformerEncoder, mask_tokens
from lmblocks.quantization import quantization_error, quantize_int8
from lmblocks.tokenization import BPETokenizer
from lmblocks.training import TrainArgs, train_lm


def test_bpe_round_trip(tmp_path):
    text = "the cat sat on the mat. the cat ate the rat. " * 30
    tok = BPETokenizer.train(text, 300, specials=["<eos>"])
    sample = "the rat sat<eos> on a hat"
    assert tok.decode(tok.encode(sample)) == sample
    assert len(tok.encode("the cat")) < len("the cat".encode())
    tok.save(tmp_path / "bpe.json")
    assert BPETokenizer.load(tmp_path / "bpe.json").encode(sample) == tok.encode(sample)


def test_int8_quantisation_is_close():
    torch.manual_seed(0)
    model = TransformerLM(LMConfig(vocab_size=30, d_model=32, n_heads=4, n_layers=2, max_seq_len=16)).eval()
    q = copy.deepcopy(model)
    assert len(quantize_int8(q)) == 2 * 6
    assert quantization_error(model, q, torch.randint(0, 30, (2, 8))) < 0.05


def test_encoder_sees_the_future():
    torch.manual_seed(0)
    enc = TransformerEncoder(LMConfig(vocab_size=30, d_model=32, n_heads=4, n_layers=1, max_seq_len=16)).eval()
    ids = torch.randint(0, 30, (1, 8))
    changed = ids.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 30
    assert not torch.allclose(enc(ids).logits[:, 0], enc(changed).logits[:, 0])
    inputs, labels = mask_tokens(ids.repeat(50, 1), mask_id=0, vocab_size=30, generator=torch.Generator().manual_seed(0))
    assert ((labels != -100).float().mean() - 0.15).abs() < 0.07


def test_beam_search_matches_greedy_with_one_beam():
    torch.manual_seed(0)
    model = TransformerLM(LMConfig(vocab_size=12, d_model=32, n_heads=4, n_layers=1, max_seq_len=32))
    ids = torch.randint(0, 12, (1, 4))
    best, _ = beam_search(model, ids, 6, num_beams=1)
    assert torch.equal(best, model.generate(ids, 6, greedy=True))


def test_train_lm_lowers_the_loss():
    torch.manual_seed(0)
    model = TransformerLM(LMConfig(vocab_size=8, d_model=32, n_heads=4, n_layers=1, max_seq_len=16))
    pattern = torch.arange(17) % 8

    def batches():
        while True:
            yield pattern[:-1].repeat(4, 1), pattern[1:].repeat(4, 1)

    state = train_lm(model, batches(), TrainArgs(steps=60, lr=3e-3, warmup=5, eval_every=1000, log_every=1000), log=lambda s: None)
    assert state.history[-1]["loss"] < 0.5 * state.history[0]["loss"]
