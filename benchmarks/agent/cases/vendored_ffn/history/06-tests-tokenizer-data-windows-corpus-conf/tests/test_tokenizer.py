from charlm.tokenizer import SPECIALS, CharTokenizer


def test_round_trip(tmp_path):
    tok = CharTokenizer.from_text("hello world.")
    ids = tok.encode("hello", add_bos=True, add_eos=True)
    assert tok.decode(ids) == "hello"
    tok.save(tmp_path / "t.json")
    assert CharTokenizer.load(tmp_path / "t.json").itos == tok.itos


def test_unknown_characters_map_to_unk():
    tok = CharTokenizer.from_text("ab")
    assert tok.encode("z") == [tok.unk_id]
    assert tok.vocab_size == len(SPECIALS) + 2
