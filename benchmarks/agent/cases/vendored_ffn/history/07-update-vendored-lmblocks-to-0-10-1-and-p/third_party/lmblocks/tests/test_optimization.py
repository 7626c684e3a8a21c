import torch

from lmblocks import LMConfig, TransformerLM, build_optimizer, cosine_with_warmup
from lmblocks.optimization import param_groups, wsd


def test_groups_cover_every_parameter_once():
    model = TransformerLM(LMConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_seq_len=16))
    groups = param_groups(model, 0.1)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len({id(p) for p in model.parameters()})
    decayed = {id(p) for p in groups[0]["params"]}
    assert id(model.blocks[0].attn.q_proj.weight) in decayed
    assert id(model.blocks[0].norm_attn.weight) not in decayed


def test_schedules():
    opt = build_optimizer(torch.nn.Linear(2, 2), lr=1.0)
    sched = cosine_with_warmup(opt, warmup=10, total=100, min_ratio=0.1)
    lrs = []
    for _ in range(100):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[0] == 0.1 and abs(max(lrs) - 1.0) < 1e-9 and abs(lrs[-1] - 0.1) < 0.01
    opt2 = build_optimizer(torch.nn.Linear(2, 2), lr=1.0)
    s2 = wsd(opt2, warmup=5, total=50)
    for _ in range(30):
        opt2.step()
        s2.step()
    assert s2.get_last_lr()[0] == 1.0
