"""Config and environment diffs of two runs, in the layouts real tools write: wandb run folders,
MLflow runs, Lightning hparams, HF TrainingArguments printed in a log, argparse Namespace dumps,
pip freezes and trainsleuth environment reports; ranked by the failure-mode catalog."""

from __future__ import annotations

import json
from pathlib import Path

from trainsleuth.knowledge.catalog import failure_modes
from trainsleuth.tools.compare.configs import diff_configs, diff_environments, parse_namespace, read_meta
from trainsleuth.tools.compare.rank import (
    CONFIG_CATEGORIES,
    ENV_CATEGORIES,
    observed_failure_modes,
    rank_differences,
)


def _wandb_run(root: Path, lr: float, commit: str, torch: str) -> Path:
    files = root / "wandb" / "run-20240501_101010-abc123" / "files"
    files.mkdir(parents=True)
    (files / "config.yaml").write_text(
        "wandb_version: 1\n\n_wandb:\n  desc: null\n  value:\n    cli_version: 0.16.6\n"
        f"learning_rate:\n  desc: null\n  value: {lr}\n"
        "per_device_train_batch_size:\n  desc: null\n  value: 8\n"
        "output_dir:\n  desc: null\n  value: out/run-" + commit[:4] + "\n"
    )
    (files / "wandb-metadata.json").write_text(
        json.dumps(
            {
                "python": "3.11.7",
                "gpu": "NVIDIA A100-SXM4-80GB",
                "gpu_count": 8,
                "git": {"remote": "https://github.com/x/y", "commit": commit},
            }
        )
    )
    (files / "requirements.txt").write_text(
        f"torch=={torch}\ntransformers==4.40.0\nnumpy==1.26.4\nwandb==0.16.6\n"
    )
    (files / "output.log").write_text(
        "".join(f"{{'loss': {2.0 - i / 100}, 'step': {i}}}\n" for i in range(20))
    )
    return root


def test_wandb_runs_diff_config_environment_and_commit(tmp_path: Path) -> None:
    a = read_meta(_wandb_run(tmp_path / "a", 5e-5, "a" * 40, "2.2.1"))
    b = read_meta(_wandb_run(tmp_path / "b", 5e-4, "b" * 40, "2.3.0"))
    assert a.config["learning_rate"] == 5e-5 and "_wandb" not in a.config
    assert a.commit == "a" * 40 and b.commit == "b" * 40
    assert a.packages["torch"] == "2.2.1" and a.facts["gpu"].startswith("NVIDIA A100")
    diffs, skipped = diff_configs(a.config, b.config)
    assert [d.item for d in diffs] == ["learning_rate"] and skipped == 1  # output_dir is bookkeeping
    env = diff_environments(a, b)
    assert [d.item for d in env] == ["package:torch"]
    ranked = rank_differences(diffs + env, observed_failure_modes("loss", "higher", after_restart=False))
    assert ranked[0].item == "learning_rate" and "lr-too-high" in ranked[0].why
    assert ranked[1].item == "package:torch" and ranked[1].category == "torch"


def test_mlflow_params_and_tags(tmp_path: Path) -> None:
    def run(root: Path, bs: str, commit: str) -> Path:
        (root / "metrics").mkdir(parents=True)
        (root / "metrics" / "loss").write_text("1700000000000 2.0 0\n1700000000100 1.5 1\n")
        (root / "params").mkdir()
        (root / "params" / "batch_size").write_text(bs)
        (root / "params" / "optimizer").write_text("adamw")
        (root / "tags").mkdir()
        (root / "tags" / "mlflow.source.git.commit").write_text(commit)
        (root / "tags" / "mlflow.runName").write_text("r")
        return root

    a = read_meta(run(tmp_path / "a", "32", "1" * 40))
    b = read_meta(run(tmp_path / "b", "256", "2" * 40))
    assert a.config == {"batch_size": 32, "optimizer": "adamw"} and a.commit == "1" * 40
    diffs, _ = diff_configs(a.config, b.config)
    ranked = rank_differences(diffs, observed_failure_modes("grad_norm", "higher", False))
    assert ranked[0].item == "batch_size" and ranked[0].category == "batch size"


def test_hf_training_arguments_and_argparse_printed_in_logs(tmp_path: Path) -> None:
    hf = tmp_path / "hf.log"
    hf.write_text(
        "[INFO|trainer.py:1] Training/evaluation parameters TrainingArguments(\n"
        "_n_gpu=1,\nadam_epsilon=1e-08,\nbf16=False,\nfp16=True,\nlearning_rate=2e-05,\n"
        "lr_scheduler_type=SchedulerType.LINEAR,\nlogging_dir=out/runs/May01,\nwarmup_ratio=0.0,\n)\n"
        "{'loss': 0.69, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    )
    meta = read_meta(hf)
    assert meta.config["fp16"] is True and meta.config["learning_rate"] == 2e-05
    assert meta.config["lr_scheduler_type"] == "SchedulerType.LINEAR"
    fairseq = tmp_path / "train.log"
    fairseq.write_text(
        "2024-05-01 | INFO | fairseq_cli.train | Namespace(arch='transformer', lr=[0.0005], "
        "warmup_updates=4000, clip_norm=0.0, fp16=True, seed=1, save_dir='checkpoints/x')\n"
        "commit: 3f2a9c1d\n"
    )
    ns = read_meta(fairseq)
    assert ns.config["lr"] == [0.0005] and ns.config["warmup_updates"] == 4000
    assert ns.commit == "3f2a9c1d"
    assert parse_namespace("Namespace(a=1, fn=<function f at 0x7f>)") is None or True  # never raises


def test_keys_named_differently_are_matched_and_paths_that_matter_kept() -> None:
    good = {"learning_rate": 1e-3, "train_batch_size": 32, "output_dir": "a", "data_path": "/data/v1",
            "logging_dir": "a/logs"}  # fmt: skip
    bad = {"optimizer.lr": 1e-2, "batch_size": 32, "output_dir": "b", "data_path": "/data/v2",
           "logging_dir": "b/logs"}  # fmt: skip
    diffs, skipped = diff_configs(good, bad)
    items = {d.item for d in diffs}
    assert items == {"learning_rate / optimizer.lr", "data_path"}, items
    assert skipped == 2


def test_environment_report_files_and_pip_freezes(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.mkdir()
    report = {
        "environments": [
            {
                "interpreter": "/x/python",
                "python": {"version": "3.11.7"},
                "torch": {"version": "2.3.0", "cuda": "12.1", "cudnn": 8902},
                "installed": {"torch": "2.3.0", "numpy": "1.26.4"},
                "env": {"NCCL_P2P_DISABLE": "1"},
            }
        ]
    }
    (a / "environment.json").write_text(json.dumps(report))
    (a / "log.txt").write_text("loss 1.0\n")
    b = tmp_path / "b"
    b.mkdir()
    (b / "pip_freeze.txt").write_text(
        "torch==2.4.0\nnumpy==1.26.4\n# comment\n-e git+https://x@abc#egg=proj\n"
    )
    (b / "log.txt").write_text("loss 1.0\n")
    ma, mb = read_meta(a), read_meta(b)
    assert ma.facts["cuda"] == "12.1" and ma.facts["env:NCCL_P2P_DISABLE"] == "1"
    diffs = diff_environments(ma, mb)
    assert [d.item for d in diffs] == ["package:torch"]


def test_malformed_files_are_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("a: [unclosed\n")
    (tmp_path / "args.json").write_text("{not json")
    (tmp_path / "train.log").write_text("loss 1.0\n")
    meta = read_meta(tmp_path)
    assert len(meta.notes) == 2 and all("not parsed" in n for n in meta.notes)


def test_catalog_links_exist() -> None:
    known = set(failure_modes())
    for cat in (*CONFIG_CATEGORIES, *ENV_CATEGORIES):
        assert set(cat.failure_modes) <= known, cat.label
    for role in ("lr", "loss", "val_loss", "grad_norm", "loss_scale", "throughput", "accuracy"):
        for direction in ("higher", "lower", "nonfinite"):
            assert set(observed_failure_modes(role, direction, True).failure_modes) <= known
