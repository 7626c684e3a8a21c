"""Finding code -> failure-mode catalog ids. Light (no imports) because every analysis uses it.

Owned by the knowledge area (issue 8). Every code in findings.md links to at least one catalog
entry; the catalog's per-entry `codes` list is derived from this table (single source of truth),
and a test checks both directions. Analyses call `failure_modes_for(code)` when building findings.
Ids are listed most likely first.
"""

from __future__ import annotations

CODE_LINKS: dict[str, list[str]] = {
    # ----------------------------------------------------------------- gradient probe: loss contract (issue 17)
    "labels_all_ignored": ["padding-in-loss", "label-errors"],
    "label_out_of_range": ["label-errors"],
    "loss_input_mismatch": ["unstable-softmax", "loss-reduction-mismatch"],
    "loss_wrong_axis": ["loss-reduction-mismatch"],
    "loss_broadcast": ["loss-reduction-mismatch"],
    "initial_loss_off": ["bad-initialisation"],
    "train_mode_off": ["train-eval-mode"],
    # gradient probe: regime-aware rules (issue 28)
    "target_network_shared": ["target-network-copy"],
    "target_not_updated": ["target-network-copy"],
    "target_receives_gradient": ["target-network-copy", "accidental-detach"],
    "teacher_in_train_mode": ["train-eval-mode"],
    "loss_term_wrong_sign": ["loss-term-sign"],
    "advantage_not_detached": ["advantage-not-detached"],
    "dropout_in_eval": ["train-eval-mode"],
    # trace_diff (issue 29): the first call or tensor that differs between a good and a bad variant
    "call_missing": ["bad-initialisation", "version-regression", "train-eval-mode"],
    "call_order": ["bad-initialisation", "version-regression"],
    "call_args": ["version-regression", "params-missing-from-optimizer"],
    "update_lost": ["params-missing-from-optimizer", "frozen-parameters", "accidental-detach"],
    "trace_divergence": ["version-regression", "rank-dependent-randomness", "unsynced-frozen-weights"],
    "invariant_broken": ["train-eval-mode", "frozen-parameters", "unsynced-frozen-weights"],
    "grad_accumulation_mismatch": ["grad-accumulation-scaling", "missing-zero-grad", "ddp-no-sync-misuse"],
    # ----------------------------------------------------------------- gradient probe
    "nonfinite_loss": [
        "log-of-zero",
        "unstable-softmax",
        "division-by-zero",
        "fp16-overflow",
        "lr-too-high",
        "corrupt-samples",
    ],
    "nonfinite_forward": [
        "fp16-overflow",
        "log-of-zero",
        "division-by-zero",
        "epsilon-choice",
        "unstable-softmax",
        "attention-logit-growth",
    ],
    "nonfinite_gradient": [
        "sqrt-at-zero",
        "epsilon-choice",
        "division-by-zero",
        "log-of-zero",
        "fp16-overflow",
    ],
    "exploding_gradients": [
        "lr-too-high",
        "missing-grad-clipping",
        "bad-initialisation",
        "missing-normalisation",
        "missing-warmup",
    ],
    "vanishing_gradients": [
        "activation-saturation",
        "missing-residual",
        "bad-initialisation",
        "dead-relu",
    ],
    "dead_relu": ["dead-relu", "lr-too-high", "bad-initialisation"],
    "saturated_activations": ["activation-saturation", "input-not-normalised", "bad-initialisation"],
    "no_gradient": ["accidental-detach", "no-grad-in-training", "unused-branch", "ddp-unused-parameters"],
    "params_not_updated": ["params-missing-from-optimizer", "frozen-parameters", "lr-schedule-misconfigured"],
    "update_ratio_high": ["lr-too-high", "missing-warmup", "weight-decay-on-norms"],
    "update_ratio_low": ["lr-too-low", "lr-schedule-misconfigured", "grad-accumulation-scaling"],
    "gradient_imbalance": ["bad-initialisation", "missing-normalisation", "loss-weighting-imbalance"],
    "loss_component_imbalance": ["loss-weighting-imbalance", "loss-reduction-mismatch", "reward-scale"],
    "grad_not_zeroed": ["missing-zero-grad", "grad-accumulation-scaling"],
    "loss_not_decreasing": [
        "lr-too-low",
        "label-errors",
        "accidental-detach",
        "params-missing-from-optimizer",
        "train-eval-mode",
        "loss-reduction-mismatch",
        "padding-in-loss",
    ],
    "loss_diverging": ["lr-too-high", "missing-warmup", "fp16-overflow", "missing-zero-grad"],
    "input_not_normalized": ["input-not-normalised", "corrupt-samples"],
    "precision_mismatch": [
        "bf16-accumulation",
        "fp16-overflow",
        "autocast-weight-cache-stale",
        "reduced-precision-reductions",
    ],
    "rank_divergence": [
        "unsynced-frozen-weights",
        "rank-dependent-randomness",
        "ddp-no-sync-misuse",
        "fsdp-zero-mixed-precision",
        "sequence-parallel-gather",
    ],
    "collective_mismatch": [
        "rank-only-collective",
        "barrier-mismatch",
        "ddp-unused-parameters",
        "collective-timeout",
    ],
    "rank_failed": [
        "collective-timeout",
        "ddp-unused-parameters",
        "rank-only-collective",
        "out-of-memory",
    ],
    "job_hung": [
        "rank-only-collective",
        "barrier-mismatch",
        "collective-timeout",
        "straggler-rank",
        "dataloader-deadlock",
    ],
    # ----------------------------------------------------------------- training-log analysis
    "nonfinite_metric": [
        "fp16-overflow",
        "log-of-zero",
        "division-by-zero",
        "lr-too-high",
        "corrupt-samples",
    ],
    "loss_spike": [
        "corrupt-samples",
        "adam-epsilon-instability",
        "attention-logit-growth",
        "missing-grad-clipping",
        "optimizer-state-not-restored",
        "resume-data-position",
    ],
    "grad_norm_spike": [
        "missing-grad-clipping",
        "adam-epsilon-instability",
        "attention-logit-growth",
        "corrupt-samples",
    ],
    "divergence": ["lr-too-high", "missing-warmup", "attention-logit-growth", "rl-kl-collapse"],
    "plateau": [
        "lr-too-low",
        "lr-schedule-misconfigured",
        "dead-relu",
        "activation-saturation",
        "label-errors",
        "rl-entropy-collapse",
        "codebook-collapse",
        "class-imbalance",
    ],
    "constant_metric": [
        "frozen-parameters",
        "stale-metric-logging",
        "zero-variance-advantages",
        "rl-kl-collapse",
        "codebook-collapse",
        "low-codebook-perplexity",
    ],
    "oscillation": ["lr-too-high", "no-shuffling", "batch-size-noise"],
    "overfitting": ["overfitting-regularisation", "data-leakage", "train-eval-mode", "reward-hacking"],
    "loss_scale_collapse": ["fp16-loss-scaling", "fp16-overflow", "autocast-weight-cache-stale"],
    "skipped_steps": ["fp16-loss-scaling", "fp16-overflow", "corrupt-samples"],
    "throughput_drop": [
        "dataloader-bottleneck",
        "retained-graph-memory",
        "host-device-sync",
        "straggler-rank",
    ],
    "error_message": [
        "out-of-memory",
        "collective-timeout",
        "checkpoint-key-mismatch",
        "distributed-checkpoint-keys",
        "version-regression",
        "dataloader-deadlock",
    ],
    # ----------------------------------------------------------------- compare_runs / check_resume
    "run_divergence": [
        "lr-schedule-misconfigured",
        "optimizer-state-not-restored",
        "version-regression",
        "resume-data-position",
        "lr-too-high",
    ],
    "resume_not_restored": [
        "optimizer-state-not-restored",
        "resume-data-position",
        "checkpoint-key-mismatch",
    ],
    "lr_warmup_unfinished": ["lr-schedule-misconfigured", "lr-too-low"],
}


def failure_modes_for(code: str) -> list[str]:
    return list(CODE_LINKS.get(code, []))
