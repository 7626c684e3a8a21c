import pytest
import torch

from lmblocks import LMConfig, TransformerLM
from lmblocks.lora import LoRALinear, inject_lora, mark_only_lora_trainable, merge_lora


def _model():
    torch.manual_seed(0)
    return TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_seq_len=16))


def test_inject_and_train_only_adapters():
    model = _model()
    names = inject_lora(model, ["q_proj", "v_proj"], rank=4)
    assert len(names) == 4
    mark_only_lora_trainable(model)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)


def test_merge_preserves_outputs():
    model = _model().eval()
    inject_lora(model, ["re:blocks\\.\\d+\\.ffn\\.fc_in"], rank=2)
    for m in model.modules():
        if isinstance(m, LoRALinear):
            torch.nn.init.normal_(m.lora_b)
    ids = torch.randint(0, 20, (1, 6))
    before = model(ids).logits
    assert merge_lora(model) == 2
    assert torch.allclose(before, model(ids).logits, atol=1e-5)


def test_no_match_is_an_error():
    with pytest.raises(ValueError):
        inject_lora(_model(), ["nope"])
