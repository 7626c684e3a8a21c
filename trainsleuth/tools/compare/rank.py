"""Rank what differs between two runs by how often such a difference causes the divergence seen.

The observed divergence (which metric, which way, right after a resume or not) is turned into the
finding codes that describe it; the failure-mode catalog links each code to its likely root causes,
most likely first (`knowledge.links.CODE_LINKS`). A config or environment difference scores by the
catalog entries it can cause, weighted by how high they stand for the observed codes, plus a small
prior of its own (a changed learning rate matters more often than a changed log interval).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainsleuth.knowledge.links import CODE_LINKS
from trainsleuth.tools.compare.configs import Difference


@dataclass(frozen=True)
class Category:
    label: str
    pattern: re.Pattern[str]
    failure_modes: tuple[str, ...]
    prior: float
    why: str = ""


def _c(label: str, pattern: str, fms: tuple[str, ...], prior: float, why: str = "") -> Category:
    return Category(label, re.compile(pattern, re.I), fms, prior, why)


# First match wins, so specific categories come before broad ones.
CONFIG_CATEGORIES = (
    _c(
        "logging",
        r"(log_every|logging_steps|log_interval|eval_steps|eval_every|eval_interval|save_steps|"
        r"save_every|print_freq|log_freq|save_total_limit)",
        (),
        0.02,
        "changes only what is logged or saved",
    ),
    _c("seed", r"seed", (), 0.1, "a seed changes only the noise, unless the runs are compared step for step"),
    _c("warmup", r"warmup", ("missing-warmup", "lr-schedule-misconfigured"), 0.8),
    _c(
        "lr schedule",
        r"(sched|schedule|decay_(steps|style|type|iters)|lr_decay|cosine|anneal|milestone|"
        r"gamma|step_size|t_max|cycle|min_lr|final_lr|lr_end)",
        ("lr-schedule-misconfigured", "missing-warmup"),
        0.8,
    ),
    _c(
        "learning rate",
        r"(^|[._])(lr|learning_rate|base_lr|max_lr|peak_lr)$",
        ("lr-too-high", "lr-too-low", "lr-schedule-misconfigured"),
        0.9,
    ),
    _c("gradient accumulation", r"accum", ("grad-accumulation-scaling",), 0.7),
    _c(
        "batch size",
        r"(batch_size|bsz|(^|[._])batch$|micro_batch|global_batch|tokens_per_batch)",
        ("batch-size-noise", "grad-accumulation-scaling", "lr-too-high"),
        0.7,
    ),
    _c("gradient clipping", r"(clip|max_grad_norm)", ("missing-grad-clipping",), 0.7),
    _c(
        "precision",
        r"(fp16|bf16|fp8|(^|[._])amp|precision|dtype|half|mixed|autocast|tf32|loss_scale|scaler)",
        ("fp16-overflow", "fp16-loss-scaling", "bf16-accumulation", "reduced-precision-reductions"),
        0.75,
    ),
    _c(
        "weight decay",
        r"(weight_decay|(^|[._])wd$)",
        ("weight-decay-on-norms", "overfitting-regularisation"),
        0.5,
    ),
    _c(
        "optimizer",
        r"(optim|adam|beta|momentum|nesterov|(^|[._])eps(ilon)?$)",
        ("adam-epsilon-instability", "lr-too-high", "lr-too-low"),
        0.6,
    ),
    _c(
        "resume / checkpoint",
        r"(resume|checkpoint|ckpt|restore|load_from|init_from|pretrained)",
        ("optimizer-state-not-restored", "resume-data-position", "checkpoint-key-mismatch"),
        0.65,
    ),
    _c(
        "distributed",
        r"(world_size|nproc|num_gpus|n_gpu|num_nodes|nodes|ddp|fsdp|zero|deepspeed|parallel|"
        r"sharding|devices|strategy)",
        (
            "ddp-no-sync-misuse",
            "fsdp-zero-mixed-precision",
            "rank-dependent-randomness",
            "grad-accumulation-scaling",
        ),
        0.6,
    ),
    _c(
        "loss",
        r"(loss|reduction|ignore_index|label_smooth|pad)",
        ("loss-reduction-mismatch", "padding-in-loss", "loss-weighting-imbalance"),
        0.5,
    ),
    _c("initialisation", r"(init|(^|[._])std$|initializer_range)", ("bad-initialisation",), 0.5),
    _c(
        "regularisation",
        r"(dropout|regulari|stochastic_depth|drop_path)",
        ("overfitting-regularisation", "train-eval-mode"),
        0.4,
    ),
    _c(
        "data",
        r"(data|shuffle|worker|augment|tokeni[sz]er|split|sampler|drop_last|max_samples|num_samples)",
        (
            "no-shuffling",
            "data-leakage",
            "corrupt-samples",
            "worker-seed-duplication",
            "dataloader-bottleneck",
        ),
        0.55,
    ),
    _c(
        "architecture",
        r"(hidden|(^|[._])dim$|d_model|layers|n_layer|n_head|heads|width|depth|norm|activation|"
        r"act_fn|vocab|block_size|seq_len|max_len|context|n_embd|intermediate)",
        ("missing-normalisation", "bad-initialisation", "attention-logit-growth"),
        0.45,
    ),
    _c(
        "training length",
        r"(max_steps|epochs|total_steps|train_steps|iters|max_iter)",
        ("lr-schedule-misconfigured",),
        0.35,
        "the schedule's length often follows it",
    ),
    _c(
        "determinism / kernels",
        r"(compile|deterministic|cudnn|benchmark|matmul_precision|attn_impl|attention_impl|"
        r"flash|sdpa)",
        ("reduced-precision-reductions", "version-regression"),
        0.35,
    ),
)
KEY_LIBRARIES = {
    "torch", "transformers", "accelerate", "deepspeed", "numpy", "datasets", "tokenizers", "peft", "trl",
    "lightning", "pytorch-lightning", "flash-attn", "xformers", "apex", "triton", "megatron-core", "bitsandbytes",
    "safetensors", "jax", "tensorflow", "keras", "scikit-learn", "pandas", "timm", "diffusers", "nvidia-nccl-cu12",
}  # fmt: skip
ENV_CATEGORIES = (
    _c("torch", r"^(package:torch|torch)$", ("version-regression", "reduced-precision-reductions"), 0.8),
    _c(
        "CUDA stack",
        r"(cuda|cudnn|nccl|driver|rocm|hip)",
        ("version-regression", "reduced-precision-reductions", "collective-timeout"),
        0.6,
    ),
    _c(
        "hardware",
        r"^(gpu|gpu_count|cpu_count|devices?)$",
        ("reduced-precision-reductions", "straggler-rank", "dataloader-bottleneck"),
        0.5,
    ),
    _c("python", r"^python", ("version-regression",), 0.5),
    _c("environment variable", r"^env:", ("collective-timeout", "version-regression"), 0.35),
)


@dataclass
class Observed:
    """The divergence as finding codes and catalog entries with weights (most likely first)."""

    codes: list[str]
    failure_modes: dict[str, float]
    metric_role: str | None = None


def observed_failure_modes(role: str | None, direction: str | None, after_restart: bool) -> Observed:
    codes: list[str] = []
    extra: list[str] = []
    if after_restart:
        extra = ["optimizer-state-not-restored", "resume-data-position", "checkpoint-key-mismatch"]
    if direction == "nonfinite":
        codes = ["nonfinite_metric", "loss_diverging"]
    elif role == "lr":
        extra += ["lr-schedule-misconfigured", "missing-warmup"]
        extra += ["lr-too-high"] if direction == "higher" else ["lr-too-low"]
    elif role in ("loss", "val_loss", "perplexity", "loss_component"):
        codes = (
            ["divergence", "loss_spike", "loss_diverging"] if direction == "higher" else ["update_ratio_high"]
        )
        if role == "val_loss" and direction == "higher":
            codes = ["overfitting", *codes]
        codes += ["plateau"] if direction == "higher" else []
    elif role in ("accuracy", "val_accuracy", "reward"):
        codes = ["plateau", "loss_not_decreasing"] if direction == "lower" else []
    elif role == "grad_norm":
        codes = ["grad_norm_spike", "exploding_gradients"] if direction == "higher" else ["vanishing_gradients",
                                                                                          "update_ratio_low"]  # fmt: skip
    elif role == "loss_scale":
        codes = ["loss_scale_collapse", "skipped_steps"]
    elif role in ("throughput", "step_time"):
        codes = ["throughput_drop"]
    elif role in ("skipped", "nan_iterations"):
        codes = ["skipped_steps"]
    weights: dict[str, float] = {}
    for i, fm in enumerate(extra):
        weights[fm] = max(weights.get(fm, 0.0), 1.0 / (1 + 0.5 * i))
    for code in codes:
        for i, fm in enumerate(CODE_LINKS.get(code, [])):
            weights[fm] = max(weights.get(fm, 0.0), 0.8 / (1 + 0.5 * i))
    return Observed(codes, weights, role)


def rank_differences(diffs: list[Difference], observed: Observed | None) -> list[Difference]:
    """Fill category, failure modes, score and why; most likely cause first."""
    for d in diffs:
        cats = CONFIG_CATEGORIES if d.kind == "config" else ENV_CATEGORIES
        key = d.item.split(" / ")[0]
        cat = next((c for c in cats if c.pattern.search(key)), None)
        if cat is None and d.kind == "environment":
            lib = key.removeprefix("package:")
            cat = (
                _c("key library", ".", ("version-regression",), 0.55)
                if lib in KEY_LIBRARIES
                else _c("package", ".", ("version-regression",), 0.15)
            )
        if cat is None:
            cat = _c("other", ".", (), 0.25)
        d.category = cat.label
        d.failure_modes = list(cat.failure_modes)
        linked = {
            fm: observed.failure_modes[fm]
            for fm in cat.failure_modes
            if observed and fm in observed.failure_modes
        }
        d.score = round(cat.prior + sum(linked.values()), 3)
        if observed and observed.metric_role == "lr" and cat.label in ("learning rate", "lr schedule", "warmup",
                                                                        "training length", "resume / checkpoint"):  # fmt: skip
            d.score += 1.0  # the log itself says the schedule differs
            linked = linked or {"lr-schedule-misconfigured": 1.0}
        if d.absent:
            d.score -= 0.05  # a key only one run records is often a renamed or defaulted one
        if linked:
            d.why = (
                "can cause the divergence seen (" + ", ".join(sorted(linked, key=lambda f: -linked[f])) + ")"
            )
        else:
            d.why = cat.why or ("no catalog link to the divergence seen" if observed else "")
    diffs.sort(key=lambda d: (-d.score, d.kind, d.item))
    return diffs
