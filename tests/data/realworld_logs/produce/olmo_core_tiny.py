"""Train a tiny OLMo-2-style model with OLMo-core's own Trainer on CPU (no downloads).

Follows OLMo-core's src/examples/llm/train.py (model factory, NumpyFSLDatasetConfig,
NumpyDataLoaderConfig, TransformerTrainModuleConfig, TrainerConfig, LMEvaluatorCallbackConfig),
scaled down: `TransformerConfig.olmo2_1M` over a byte-level vocabulary (256); token files written
here from the license texts in /usr/share/common-licenses (one byte = one token, paragraphs ended
by EOS=0, raw uint8 memmaps, as OLMo-core picks uint8 for a 256-token vocabulary); no distributed
backend, no compile, fp32. The console output is OLMo-core's ConsoleLoggerCallback
(`[step=N/M,...]` lines, then `    train/CE loss=...` lines every --collect steps).

    python olmo_core_tiny.py --out DIR [--steps 300] [--lr 4e-3] [--collect 5]
"""

from __future__ import annotations

import argparse
import glob
import os
from pathlib import Path

import numpy as np


def write_tokens(out: Path) -> tuple[str, str]:
    paths = sorted(
        p for p in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(p) and not os.path.islink(p)
    )
    # One document per paragraph, each followed by EOS (token 0, a byte the texts never contain):
    # OLMo-core's padded eval dataset needs document boundaries.
    docs = [d for p in paths for d in Path(p).read_bytes().split(b"\n\n") if d.strip()]
    data = b"".join(d + b"\x00" for d in docs)
    # OLMo-core reads token files as raw memmaps and picks the dtype from the vocabulary size
    # (uint8 for 256 tokens), so the bytes are written as uint8.
    toks = np.frombuffer(data, dtype=np.uint8)
    n = int(len(toks) * 0.9)
    train, val = out / "train.npy", out / "val.npy"
    np.memmap(train, dtype=np.uint8, mode="w+", shape=(n,))[:] = toks[:n]
    np.memmap(val, dtype=np.uint8, mode="w+", shape=(len(toks) - n,))[:] = toks[n:]
    return str(train), str(val)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=4e-3)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument(
        "--collect", type=int, default=5, help="metrics_collect_interval (console metrics every N steps)"
    )
    a = p.parse_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    train_path, val_path = write_tokens(out)

    from olmo_core.data import (
        NumpyDataLoaderConfig,
        NumpyFSLDatasetConfig,
        NumpyPaddedFSLDatasetConfig,
        TokenizerConfig,
    )
    from olmo_core.nn.transformer import TransformerConfig
    from olmo_core.optim import AdamWConfig, CosWithWarmup
    from olmo_core.train import (
        Duration,
        TrainerConfig,
        prepare_training_environment,
        teardown_training_environment,
    )
    from olmo_core.train.callbacks import LMEvaluatorCallbackConfig
    from olmo_core.train.train_module import TransformerTrainModuleConfig
    from olmo_core.utils import seed_all

    prepare_training_environment(backend=None)
    seed_all(0)
    tok = TokenizerConfig(vocab_size=256, eos_token_id=0, pad_token_id=1)
    model_config = TransformerConfig.olmo2_1M(vocab_size=tok.padded_vocab_size())
    dataset_config = NumpyFSLDatasetConfig(
        paths=[train_path], sequence_length=a.seq, tokenizer=tok, work_dir=str(out / "work")
    )
    data_loader_config = NumpyDataLoaderConfig(global_batch_size=16 * a.seq, seed=0, num_workers=0)
    train_module_config = TransformerTrainModuleConfig(
        rank_microbatch_size=16 * a.seq,
        max_sequence_length=a.seq,
        optim=AdamWConfig(lr=a.lr),
        compile_model=False,
        max_grad_norm=1.0,
        scheduler=CosWithWarmup(warmup_steps=20),
    )
    trainer_config = TrainerConfig(
        save_folder=str(out / "ckpt"),
        save_overwrite=True,
        metrics_collect_interval=a.collect,
        cancel_check_interval=10,
        max_duration=Duration.steps(a.steps),
        no_checkpoints=True,
    ).with_callback(
        "lm_evaluator",
        LMEvaluatorCallbackConfig(
            eval_dataset=NumpyPaddedFSLDatasetConfig(
                paths=[val_path],
                metadata=[{"label": "licenses-val"}],
                sequence_length=a.seq,
                tokenizer=tok,
                work_dir=str(out / "work"),
            ),
            eval_interval=50,
            eval_duration=Duration.steps(10),
        ),
    )
    model = model_config.build(init_device="cpu")
    train_module = train_module_config.build(model)
    dataset = dataset_config.build()
    data_loader = data_loader_config.build(dataset, dp_process_group=train_module.dp_process_group)
    trainer = trainer_config.build(train_module, data_loader)
    trainer.fit()
    teardown_training_environment()


if __name__ == "__main__":
    main()
