"""Command line: ``python -m patchcast train --config configs/x.yaml [section.key=value ...]``."""

from __future__ import annotations

import argparse
import sys

from patchcast.config import load_config
from patchcast.data.loaders import build_loaders
from patchcast.models import build_model, count_parameters
from patchcast.registry import DATASETS, MODELS
from patchcast.training import Trainer
from patchcast.utils.logging import RunLogger
from patchcast.utils.seed import seed_everything


def _train(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    if args.epochs is not None:
        cfg.train.epochs = args.epochs
    gen = seed_everything(cfg.train.seed)
    logger = RunLogger(cfg.train.out_dir, quiet=args.quiet)
    data = build_loaders(cfg.data, cfg.model.lookback, cfg.model.horizon, gen)
    model = build_model(cfg.model, data.n_channels)
    logger.info(
        f"{cfg.name}: model {cfg.model.name} ({count_parameters(model):,} parameters), "
        f"data {cfg.data.name} ({len(data.train.dataset)} train windows x {data.n_channels} channels)"
    )
    result = Trainer(cfg, model, logger).fit(data.train, data.val, data.test)
    test = result.test
    logger.info(f"best epoch {result.best_epoch}  val_mse {result.best_val:.4f}")
    print(f"test mse {test['mse']:.4f} mae {test['mae']:.4f} mase {test.get('mase', float('nan')):.3f}", flush=True)
    return 0


def _list(args: argparse.Namespace) -> int:
    print("models:  ", ", ".join(MODELS.names()))
    print("datasets:", ", ".join(DATASETS.names()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patchcast", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a model from a config")
    train.add_argument("--config", required=True)
    train.add_argument("--epochs", type=int, default=None, help="override train.epochs")
    train.add_argument("--quiet", action="store_true")
    train.add_argument("overrides", nargs="*", help="section.key=value")
    train.set_defaults(func=_train)
    ls = sub.add_parser("list", help="list registered models and datasets")
    ls.set_defaults(func=_list)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
