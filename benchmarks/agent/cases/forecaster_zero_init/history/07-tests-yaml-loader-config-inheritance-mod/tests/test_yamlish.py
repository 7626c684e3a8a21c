import pytest

from patchcast.utils.yamlish import loads, parse_scalar


def test_scalars():
    assert parse_scalar("3") == 3
    assert parse_scalar("0.002") == 0.002
    assert parse_scalar("1e-3") == 0.001
    assert parse_scalar("true") is True
    assert parse_scalar("null") is None
    assert parse_scalar("'x: y'") == "x: y"
    assert parse_scalar("[a, b, 3]") == ["a", "b", 3]


def test_nested_mapping_and_lists():
    doc = loads(
        """
model:
  name: patchtst   # a comment
  zero_init: [attn.proj_out, mlp.fc2]
  layers:
    - 1
    - 2
train:
  epochs: 3
"""
    )
    assert doc == {"model": {"name": "patchtst", "zero_init": ["attn.proj_out", "mlp.fc2"], "layers": [1, 2]}, "train": {"epochs": 3}}


def test_bad_indentation_is_an_error():
    with pytest.raises(ValueError, match="line"):
        loads("a:\n  b: 1\n c: 2\n")
