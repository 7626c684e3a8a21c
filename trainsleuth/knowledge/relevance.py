"""Which parts of the knowledge base apply to this problem: domain signals from the symptom text,
the repository's own code and configs, and what its logs record.

Some failure modes belong to a domain (RL fine-tuning, vector-quantised codebooks, multi-process
training, reduced precision, sequence models, ...). Text search alone ranks them by shared words,
so a tabular regressor whose loss plateaus used to get "codebook collapse" and "RL entropy collapse"
(both list `plateau` among their codes). Here an entry that needs a domain is offered only when some
signal shows that domain; entries that fit the task or model family seen rank a little higher.
Every signal keeps where it came from, so a suggestion can say why it applies.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainsleuth.knowledge.links import failure_modes_for

# ---------------------------------------------------------------------------- domains and their signals

_W = r"(?<![A-Za-z])"  # word start that also works before punctuation-led tokens
TEXT_SIGNALS: dict[str, re.Pattern[str]] = {
    "rl": re.compile(
        _W
        + r"(rl|rlhf|rlaif|ppo|grpo|dpo|rloo|reinforce|reward|rewards|policy|policies|actor|critic|rollouts?|"
        r"advantages?|value head|reference model|ref model|kl penalty|kl coefficient|episodes?|trl)(?![A-Za-z])",
        re.I,
    ),
    "codebook": re.compile(
        _W + r"(codebooks?|vq|vq-?vae|vqgan|vector[- ]quanti[sz]\w*|quanti[sz]er|commitment loss|code usage|"
        r"dead codes|rvq|fsq|tokeni[sz]er codes)(?![A-Za-z])",
        re.I,
    ),
    "distributed": re.compile(
        _W
        + r"(ddp|fsdp|deepspeed|zero-?[123]|torchrun|nccl|gloo|ranks?|world[_ ]size|multi-?gpu|multi-?node|"
        r"\d+ gpus|\d+-gpu|\d+ processes|\d+-process|all[_-]?reduce|all[_-]?gather|collectives?|barrier|"
        r"data[- ]parallel|tensor[- ]parallel|pipeline[- ]parallel|megatron|horovod|slurm|nodes)(?![A-Za-z])",
        re.I,
    ),
    "mixed_precision": re.compile(
        _W
        + r"(fp16|bf16|fp8|float16|bfloat16|half[- ]precision|mixed[- ]precision|amp|autocast|grad ?scaler|"
        r"loss[- ]scale|\.half\(\))(?![A-Za-z])",
        re.I,
    ),
    "sequence": re.compile(
        _W
        + r"(tokens?|tokeni[sz]er|padding|pad tokens?|sequences?|seq_len|attention mask|language models?|llms?|"
        r"gpt\w*|bert|llama|mistral|t5|transformers?|text|vocab\w*|nlp|translation|next[- ]token)(?![A-Za-z])",
        re.I,
    ),
    "attention": re.compile(
        _W
        + r"(attention|transformers?|self-attention|qk|gpt\w*|bert|llama|mistral|vit|softmax logits)(?![A-Za-z])",
        re.I,
    ),
    "classification": re.compile(
        _W + r"(classif\w*|classes|class|accuracy|imbalanc\w*|labels?|categor\w*|f1|recall|minority|"
        r"chance|cross[- ]?entropy)(?![A-Za-z])",
        re.I,
    ),
    "checkpoint": re.compile(
        _W + r"(resum\w*|checkpoint\w*|restart\w*|restor\w*|reload\w*|load_state_dict|state_dict|preempt\w*|"
        r"ckpt|warm[- ]start\w*)(?![A-Za-z])",
        re.I,
    ),
    "versions": re.compile(
        _W + r"(upgrad\w*|version\w*|bump\w*|pip install|new release|released|regression|updated? (torch|"
        r"transformers|the library|packages?|dependenc\w*)|==\d)",
        re.I,
    ),
    "performance": re.compile(
        _W + r"(slow\w*|hangs?|hung|stuck|freez\w*|deadlock\w*|throughput|it/s|samples/s|tokens/s|oom|"
        r"out of memory|memory|timeouts?|utili[sz]ation|idle|speed|latency)(?![A-Za-z])",
        re.I,
    ),
    "numerics": re.compile(
        _W + r"(nan|nans|inf|infs|non-?finite|overflow\w*|underflow\w*|explod\w*|blows? up|blew up|diverg\w*|"
        r"spikes?|log\(0\)|division by zero)(?![A-Za-z])",
        re.I,
    ),
    "adapter": re.compile(
        _W + r"(lora|qlora|peft|adapters?|fine-?tun\w*|pretrained|from_pretrained|frozen backbone|heads?|"
        r"probe entrypoint)(?![A-Za-z])",
        re.I,
    ),
    "tabular": re.compile(
        _W
        + r"(tabular|csv|dataframe|pandas|regress\w*|features?|xgboost|lightgbm|sklearn|scikit)(?![A-Za-z])",
        re.I,
    ),
    "vision": re.compile(
        _W + r"(images?|pixels?|cnn|convnet|resnet|vit|augmentation|imagenet|cifar|mnist|segmentation|"
        r"detection)(?![A-Za-z])",
        re.I,
    ),
}

# What code says (imports and API names are stronger evidence than prose).
CODE_SIGNALS: dict[str, re.Pattern[str]] = {
    "rl": re.compile(
        r"(^\s*(import|from)\s+(trl|gym|gymnasium|stable_baselines3|ray\.rllib)\b|PPOTrainer|GRPOTrainer|"
        r"DPOTrainer|RLOOTrainer|RewardTrainer|reward_model|ref_model|policy_loss|compute_advantages|rollout)",
        re.M,
    ),
    "codebook": re.compile(
        r"(VectorQuantiz|vector_quantize|codebook|VQVAE|vq_vae|commitment_cost|ResidualVQ)"
    ),
    "distributed": re.compile(
        r"(torch\.distributed|init_process_group|DistributedDataParallel|FullyShardedDataParallel|\bFSDP\b|"
        r"import deepspeed|deepspeed\.initialize|Accelerator\(|dist\.all_reduce|get_world_size|LOCAL_RANK)"
    ),
    "mixed_precision": re.compile(
        r"(autocast|GradScaler|\.half\(\)|torch\.float16|torch\.bfloat16|fp16\s*[=:]\s*[Tt]rue|"
        r"bf16\s*[=:]\s*[Tt]rue|mixed_precision\s*[=:]\s*['\"]?(fp16|bf16)|precision\s*[=:]\s*['\"]?(16|bf16))"
    ),
    "sequence": re.compile(
        r"(AutoTokenizer|tokenizer|attention_mask|input_ids|nn\.Embedding|pad_token|padding_idx|seq_len|"
        r"^\s*from transformers|^\s*import transformers|ignore_index)",
        re.M,
    ),
    "attention": re.compile(
        r"(MultiheadAttention|scaled_dot_product_attention|self_attn|class \w*Attention|nn\.Transformer|"
        r"^\s*from transformers|GPT2|Bert|Llama)",
        re.M,
    ),
    "classification": re.compile(
        r"(CrossEntropyLoss|cross_entropy|num_classes|n_classes|num_labels|NLLLoss|BCEWithLogits|"
        r"binary_cross_entropy|accuracy|ForSequenceClassification|ForImageClassification)"
    ),
    "adapter": re.compile(r"(from peft|LoraConfig|get_peft_model|from_pretrained|requires_grad_\(False\))"),
    "tabular": re.compile(
        r"(^\s*import pandas|pd\.read_csv|read_parquet|^\s*from sklearn|^\s*import sklearn|xgboost|lightgbm|"
        r"catboost|StandardScaler)",
        re.M,
    ),
    "vision": re.compile(
        r"(torchvision|nn\.Conv2d|ImageFolder|^\s*import timm|PIL\.Image|transforms\.)", re.M
    ),
    "regression": re.compile(r"(MSELoss|mse_loss|L1Loss|l1_loss|HuberLoss|smooth_l1)"),
}
TEXT_SIGNALS["regression"] = re.compile(
    _W
    + r"(regress\w*|mse|rmse|mae|r2|r\^2|forecast\w*|predict(s|ing)? (prices?|values?|targets?))(?![A-Za-z])",
    re.I,
)

# A code scan establishes only properties of the code (above). A resume, a version change, a slow
# or hanging job, NaNs are events: only the symptom or the logs can show them.

# What an entry needs before it is offered.
TOPIC_NEEDS = {
    "rl-fine-tuning": "rl",
    "discrete-codebooks": "codebook",
    "distributed": "distributed",
    "mixed-precision": "mixed_precision",
    "performance-and-hangs": "performance",
    "numerics": "numerics",
}
ID_NEEDS = {
    "fp16-overflow": "mixed_precision",
    "bf16-accumulation": "mixed_precision",
    "padding-in-loss": "sequence",
    "attention-logit-growth": "attention",
    "class-imbalance": "classification",
    "optimizer-state-not-restored": "checkpoint",
    "resume-data-position": "checkpoint",
    "checkpoint-key-mismatch": "checkpoint",
    "version-regression": "versions",
    "reward-hacking": "rl",
}
CHECKLIST_NEEDS = {
    "distributed-correctness": "distributed",
    "mixed-precision": "mixed_precision",
    "reward": "rl",
    "hangs-and-performance": "performance",
    "numerical-correctness": "numerics",
    "model-adapter": "adapter",
}
# Entries that fit a task or model family rank higher where it is seen.
AFFINITY = {
    "input-not-normalised": {"tabular", "vision", "regression"},
    "label-errors": {"classification", "tabular"},
    "class-imbalance": {"classification"},
    "loss-reduction-mismatch": {"sequence", "regression"},
    "padding-in-loss": {"sequence"},
    "attention-logit-growth": {"attention"},
    "missing-warmup": {"attention"},
    "train-eval-mode": {"vision"},
    "data-leakage": {"tabular"},
    "lr-too-low": {"regression", "tabular"},
    "frozen-parameters": {"adapter"},
    "model-adapter": {"adapter"},
    "data-pipeline": {"tabular", "vision"},
}
# Log metric names that show a domain (what the logs record).
METRIC_SIGNALS: dict[str, re.Pattern[str]] = {
    "rl": re.compile(r"(reward|kl|policy|advantage|value_loss|entropy)", re.I),
    "codebook": re.compile(r"(codebook|perplexity_code|code_usage|commit|vq)", re.I),
    "mixed_precision": re.compile(r"(loss[ _]?scale|grad[ _]?scale|scaler)", re.I),
    "distributed": re.compile(r"(rank|world)", re.I),
}


@dataclass
class Signals:
    domains: dict[str, list[str]] = field(default_factory=dict)  # domain -> where it was seen

    def add(self, domain: str, where: str) -> None:
        seen = self.domains.setdefault(domain, [])
        if where not in seen and len(seen) < 5:
            seen.append(where)

    def has(self, domain: str) -> bool:
        return domain in self.domains

    def merge(self, other: Signals) -> Signals:
        out = Signals({k: list(v) for k, v in self.domains.items()})
        for d, ws in other.domains.items():
            for w in ws:
                out.add(d, w)
        return out


def text_signals(text: str, where: str = "symptom") -> Signals:
    sig = Signals()
    for domain, pattern in TEXT_SIGNALS.items():
        m = pattern.search(text or "")
        if m:
            sig.add(domain, f"{where}: {m.group(0).strip()!r}")
    return sig


def metric_signals(names: list[str] | set[str], where: str = "logged metric") -> Signals:
    sig = Signals()
    for name in names:
        for domain, pattern in METRIC_SIGNALS.items():
            if pattern.search(name):
                sig.add(domain, f"{where} {name!r}")
    return sig


# ---------------------------------------------------------------------------- repository scan

SKIP_DIRS = {
    ".git", ".hg", ".svn", ".venv", "venv", "env", ".env", "node_modules", "__pycache__", ".trainsleuth",
    "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".tox", ".idea",
    ".vscode", "wandb", "mlruns", "data", "datasets",
}  # fmt: skip
CODE_SUFFIXES = {".py", ".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".sh"}
MAX_FILES = 400
MAX_FILE_BYTES = 200_000
MAX_TOTAL_BYTES = 4_000_000
FIRST = re.compile(r"^(train|main|run|model|finetune|fine_tune|config|setup|requirements|pyproject)", re.I)

_cache_lock = threading.Lock()
_cache: dict[str, tuple[tuple[tuple[str, float, int], ...], Signals]] = {}


def _candidates(root: Path) -> list[Path]:
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).relative_to(root).parts)
        dirnames[:] = sorted(
            d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".") and depth < 5
        )
        for fn in filenames:
            p = Path(dirpath) / fn
            if p.suffix.lower() in CODE_SUFFIXES or fn.startswith("requirements"):
                files.append(p)
        if len(files) > 20 * MAX_FILES:
            break
    # entry points and configs first, shallow before deep
    files.sort(key=lambda p: (not FIRST.match(p.name), len(p.relative_to(root).parts), str(p)))
    return files[:MAX_FILES]


def repo_signals(workspace: Path) -> Signals:
    """Domains the workspace's own code and configs show (cached until a scanned file changes)."""
    root = Path(workspace)
    if not root.is_dir():
        return Signals()
    files = _candidates(root)
    stamp: list[tuple[str, float, int]] = []
    for p in files:
        try:
            st = p.stat()
        except OSError:
            continue
        stamp.append((str(p), st.st_mtime, st.st_size))
    key = tuple(stamp)
    with _cache_lock:
        hit = _cache.get(str(root))
    if hit and hit[0] == key:
        return hit[1]
    sig = Signals()
    total = 0
    for path_s, _, size in stamp:
        if size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
            continue
        try:
            text = Path(path_s).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        total += size
        rel = Path(path_s).relative_to(root).as_posix()
        for domain, pattern in CODE_SIGNALS.items():
            m = pattern.search(text)
            if m:
                line = text.count("\n", 0, m.start()) + 1
                sig.add(domain, f"{rel}:{line} {m.group(0).strip()[:40]!r}")
    with _cache_lock:
        if len(_cache) > 16:
            _cache.pop(next(iter(_cache)))
        _cache[str(root)] = (key, sig)
    return sig


# ---------------------------------------------------------------------------- applicability


def needs_of(kind: str, entry_id: str, topic: str | None = None) -> str | None:
    """The domain an entry needs, or None when it applies to any training problem."""
    if kind == "checklist":
        return CHECKLIST_NEEDS.get(entry_id)
    if kind == "failure_mode":
        return ID_NEEDS.get(entry_id) or (TOPIC_NEEDS.get(topic or "") if topic else None)
    return None  # the project's own constraints always apply


def applies(kind: str, entry_id: str, signals: Signals, topic: str | None = None) -> tuple[bool, str]:
    """(applies, why). `why` names the signal behind a domain entry."""
    need = needs_of(kind, entry_id, topic)
    if need is None:
        return True, ""
    if signals.has(need):
        return True, f"{need.replace('_', ' ')}: " + "; ".join(signals.domains[need][:2])
    return False, f"needs a {need.replace('_', ' ')} setting and nothing shows one"


def affinity(entry_id: str, signals: Signals) -> float:
    """A boost for entries that fit the task or model family seen."""
    hits = AFFINITY.get(entry_id, set()) & set(signals.domains)
    return 1.0 + 0.35 * len(hits)


def topic_of(entry_id: str) -> str | None:
    from trainsleuth.knowledge.catalog import get_failure_mode

    fm = get_failure_mode(entry_id)
    return fm.topic if fm else None


def filter_failure_modes(ids: list[str], signals: Signals) -> list[str]:
    """Keep the failure modes that apply, in order (used for analysis results' suggestions)."""
    return [i for i in ids if applies("failure_mode", i, signals, topic_of(i))[0]]


def gather(workspace: Path | None, text: str = "", metrics: list[str] | set[str] | None = None) -> Signals:
    sig = text_signals(text)
    if metrics:
        sig = sig.merge(metric_signals(metrics))
    if workspace is not None:
        sig = sig.merge(repo_signals(workspace))
    return sig


def for_workspace(workspace: Path | None) -> Callable[[list[str], set[str]], list[str]]:
    """compare_runs' `relevance`: failure modes kept when the repository or the compared metric names
    show their domain (one function for the CLI and the tool)."""

    def relevance(ids: list[str], names: set[str]) -> list[str]:
        return filter_failure_modes(ids, gather(workspace, " ".join(sorted(names)), names))

    return relevance


def relevant_failure_modes(code: str, context: list[str] | set[str]) -> list[str]:
    """`failure_modes_for`, leaving out entries of a domain nothing in `context` shows (the metric
    names a log records, the module names a probe saw, words of the symptom): no RL entropy
    collapse for a regressor's plateau."""
    names = list(context)
    signals = text_signals(" ".join(names), "context").merge(metric_signals(names))
    return filter_failure_modes(failure_modes_for(code), signals)
