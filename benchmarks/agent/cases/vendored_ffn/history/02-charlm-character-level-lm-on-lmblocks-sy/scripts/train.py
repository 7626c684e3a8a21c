"""Train a character LM: ``python scripts/train.py --config configs/quick.json [--set key=value ...]``."""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from charlm.config import load_config  # noqa: E402
from charlm.data import prepare_data  # noqa: E402
from charlm.model import build_model, describe  # noqa: E402
from charlm.trainer import train  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--config", required=True)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--quiet", action="store_true", help="only the final summary line")
    args = p.parse_args()
    cfg = load_config(args.config, args.overrides)
    torch.manual_seed(cfg.seed)
    data = prepare_data(cfg.data_dir, cfg.seq_len, cfg.corpus)
    model = build_model(cfg, data.tokenizer.vocab_size, data.tokenizer.pad_id)
    if not args.quiet:
        print(describe(model), flush=True)
        print(f"data: {len(data.train):,} train / {len(data.val):,} val tokens, {len(data.corpus.people)} people")
    start = time.time()
    result = train(cfg, model, data, quiet=args.quiet)
    print(
        f"final step {result.step} train_loss {result.train_loss:.4f} val_loss {result.val_loss:.4f} "
        f"({time.time() - start:.0f}s)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
