"""Loss breakdown of a saved model: answers per relation vs template text.

    python scripts/analyze.py runs/quick/model --data data/facts-quick
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import charlm  # noqa: E402,F401
from charlm.analysis import answer_loss, format_breakdown  # noqa: E402
from charlm.corpus import load_corpus  # noqa: E402
from charlm.tokenizer import CharTokenizer  # noqa: E402
from lmblocks import load_pretrained  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_dir")
    p.add_argument("--data", default="data/facts-quick")
    args = p.parse_args()
    model = load_pretrained(args.model_dir)
    tok = CharTokenizer.load(Path(args.model_dir) / "tokenizer.json")
    print(format_breakdown(answer_loss(model, load_corpus(args.data), tok)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
