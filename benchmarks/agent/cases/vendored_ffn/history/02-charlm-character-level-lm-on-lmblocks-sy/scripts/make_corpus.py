"""Write the synthetic facts corpus to a folder: ``python scripts/make_corpus.py data/facts --people 60``."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from charlm.corpus import make_corpus, save_corpus  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out")
    p.add_argument("--people", type=int, default=60)
    p.add_argument("--train-sentences", type=int, default=40000)
    p.add_argument("--val-sentences", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    corpus = make_corpus(args.people, args.train_sentences, args.val_sentences, args.seed)
    save_corpus(corpus, args.out)
    print(f"{args.out}: {len(corpus.text_train):,} train chars, {len(corpus.text_val):,} val chars")
    return 0


if __name__ == "__main__":
    sys.exit(main())
