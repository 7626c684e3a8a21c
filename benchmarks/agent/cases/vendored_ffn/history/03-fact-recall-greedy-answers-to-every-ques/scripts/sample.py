"""Sample from a trained model: ``python scripts/sample.py runs/quick/model --prompt "q: where does"``."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import charlm  # noqa: E402,F401  (puts third_party on the path)
from charlm.tokenizer import CharTokenizer  # noqa: E402
from lmblocks import load_pretrained  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("model_dir")
    p.add_argument("--prompt", default="q: ")
    p.add_argument("--tokens", type=int, default=120)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-n", type=int, default=3, help="number of samples")
    args = p.parse_args()
    model = load_pretrained(args.model_dir)
    tok = CharTokenizer.load(Path(args.model_dir) / "tokenizer.json")
    ids = torch.tensor([tok.encode(args.prompt)] * args.n)
    out = model.generate(
        ids,
        args.tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        greedy=args.greedy,
        seed=args.seed,
    )
    for row in out.tolist():
        print(repr(tok.decode(row)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
