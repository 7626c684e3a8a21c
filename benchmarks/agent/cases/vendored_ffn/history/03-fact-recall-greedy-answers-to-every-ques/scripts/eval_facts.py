"""Fact recall of a saved model: ``python scripts/eval_facts.py runs/quick/model --data data/facts``."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import charlm  # noqa: E402,F401
from charlm.corpus import load_corpus  # noqa: E402
from charlm.evaluate import fact_accuracy  # noqa: E402
from charlm.tokenizer import CharTokenizer  # noqa: E402
from lmblocks import load_pretrained  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("model_dir")
    p.add_argument("--data", default="data/facts")
    args = p.parse_args()
    model = load_pretrained(args.model_dir)
    tok = CharTokenizer.load(Path(args.model_dir) / "tokenizer.json")
    scores = fact_accuracy(model, load_corpus(args.data), tok)
    for relation, value in scores.items():
        print(f"{relation:6s} {value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
