import torch

from charlm.data import TokenStream, prepare_data


def test_batches_are_shifted_by_one():
    stream = TokenStream(torch.arange(1000), seq_len=16)
    x, y = stream.batch(4, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 16)
    assert torch.equal(x[:, 1:], y[:, :-1])


def test_sequential_covers_the_stream_once():
    stream = TokenStream(torch.arange(161), seq_len=16)
    starts = [int(x[i, 0]) for x, _ in stream.sequential(3) for i in range(x.shape[0])]
    assert starts == list(range(0, 160, 16))


def test_prepare_data_generates_and_reuses_the_corpus(tmp_path):
    args = {"n_people": 10, "train_sentences": 200, "val_sentences": 50, "seed": 3}
    first = prepare_data(tmp_path, 16, args)
    second = prepare_data(tmp_path, 16, args)
    assert torch.equal(first.train.ids, second.train.ids)
    assert (tmp_path / "facts.json").exists()
