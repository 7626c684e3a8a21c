"""Teach a trained model new facts with LoRA adapters on the attention and FFN projections.

    python scripts/finetune_lora.py runs/quick/model --people 10 --steps 200

New people are generated with a different seed; only the adapters train, so the old facts should
survive (compare `scripts/eval_facts.py` before and after).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import charlm  # noqa: E402,F401
from charlm.corpus import make_corpus  # noqa: E402
from charlm.data import TokenStream  # noqa: E402
from charlm.evaluate import fact_accuracy  # noqa: E402
from charlm.tokenizer import CharTokenizer  # noqa: E402
from lmblocks import build_optimizer, cosine_with_warmup, load_pretrained  # noqa: E402
from lmblocks.lora import inject_lora, lora_state_dict, mark_only_lora_trainable  # noqa: E402

TARGETS = ["q_proj", "v_proj", "fc_in", "fc_out"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_dir")
    p.add_argument("--people", type=int, default=10)
    p.add_argument("--seed", type=int, default=123)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--out", default=None, help="where to save the adapters (default: MODEL_DIR/lora.pt)")
    args = p.parse_args()

    model = load_pretrained(args.model_dir)
    tok = CharTokenizer.load(Path(args.model_dir) / "tokenizer.json")
    corpus = make_corpus(args.people, train_sentences=5000, val_sentences=200, seed=args.seed)
    stream = TokenStream(torch.tensor(tok.encode(corpus.text_train)), args.seq_len)
    replaced = inject_lora(model, TARGETS, rank=args.rank)
    mark_only_lora_trainable(model)
    print(f"LoRA on {len(replaced)} layers")
    opt = build_optimizer(model, args.lr, weight_decay=0.0)
    sched = cosine_with_warmup(opt, 20, args.steps)
    gen = torch.Generator().manual_seed(0)
    model.train()
    for step in range(1, args.steps + 1):
        x, y = stream.batch(32, gen)
        loss = model(x, labels=y).loss
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print("new facts:", fact_accuracy(model, corpus, tok))
    out = Path(args.out or Path(args.model_dir) / "lora.pt")
    torch.save(lora_state_dict(model), out)
    print(f"adapters saved to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
