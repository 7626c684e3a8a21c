"""Configs and environment reports of a run, and what differs between two runs.

Read (all bounded, nothing executed, pickles never loaded):
- YAML/JSON configs (`config.yaml`, `hparams.yaml`, `args.json`, HF `training_args.json`, Hydra's
  `.hydra/config.yaml`, PEFT `adapter_config.json`, a model's `config.json`, ...);
- wandb run files (`config.yaml` with `{value: ...}` entries, `wandb-metadata.json`,
  `requirements.txt`); MLflow runs (`params/`, `tags/`);
- argparse dumps (`Namespace(lr=0.1, ...)`) and HF `TrainingArguments(...)` blocks printed at the
  top of a log, and `args.txt`-style `key: value` files;
- environment reports: pip freezes / requirements files, conda/MLflow env files, trainsleuth
  `environment_report --json` output, `wandb-metadata.json`.
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_FILE = 2 << 20
MAX_LOG_HEAD = 256 << 10
MAX_KEYS = 5000
MAX_WALK = 2000

CONFIG_NAMES = re.compile(
    r"^(\.hydra/)?(config|configs|cfg|hparams|hyperparameters|hyper_params|args|arguments|opts|options|"
    r"params|parameters|training_args|train_args|train_config|training_config|run_config|experiment|"
    r"overrides|adapter_config|trainer_config|model_config|launch_config)(\.[\w-]+)?\.(ya?ml|json|toml|txt)$",
    re.I,
)
ENV_NAMES = re.compile(
    r"^(requirements(-[\w.]+)?\.txt|pip[_-]?freeze\.txt|pip[_-]?list\.txt|freeze\.txt|conda\.ya?ml|"
    r"environment\.ya?ml|python_env\.ya?ml|env(ironment)?([_-][\w.]+)?\.json|wandb-metadata\.json|"
    r"versions\.(txt|json))$",
    re.I,
)
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
_COMMIT_LINE = re.compile(
    r"\b(?:git[ _-]?)?(?:commit|sha|revision|hash)\b[\s:=]+['\"]?([0-9a-f]{7,40})\b", re.I
)
_FREEZE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(==|===|@)\s*([^\s;#]+)")


def is_config_or_env_file(path: Path) -> bool:
    name = path.name
    rel = f"{path.parent.name}/{name}" if path.parent.name == ".hydra" else name
    return bool(CONFIG_NAMES.match(rel) or ENV_NAMES.match(name)) or name in ("config.json", "config.yaml")


@dataclass
class Source:
    path: str
    kind: str


@dataclass
class RunMeta:
    """What a run's files say about its configuration, environment and commit."""

    config: dict[str, Any] = field(default_factory=dict)  # flattened key -> value
    config_from: dict[str, str] = field(default_factory=dict)  # key -> source file
    packages: dict[str, str] = field(default_factory=dict)  # normalised name -> version
    facts: dict[str, Any] = field(default_factory=dict)  # python, cuda, gpu, os, ...
    commit: str | None = None
    sources: list[Source] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add_config(self, values: dict[str, Any], source: str) -> None:
        for k, v in values.items():
            if k not in self.config and len(self.config) < MAX_KEYS:
                self.config[k] = v
                self.config_from[k] = source


# ---------------------------------------------------------------------------- reading


def read_meta(run_path: Path, log_file: Path | None = None) -> RunMeta:
    """Configs, environment and commit of a run (a folder: walked; a file: its known siblings and
    the head of the log itself)."""
    meta = RunMeta()
    run_path = Path(run_path)
    files: list[Path] = []
    if run_path.is_dir():
        seen = 0
        for dirpath, dirnames, filenames in os.walk(run_path):
            depth = len(Path(dirpath).relative_to(run_path).parts)
            dirnames[:] = sorted(
                d for d in dirnames if depth < 4 and (not d.startswith(".") or d == ".hydra")
            )
            for fn in sorted(filenames):
                seen += 1
                if seen > MAX_WALK:
                    break
                files.append(Path(dirpath) / fn)
            if Path(dirpath).name == "params" and (Path(dirpath).parent / "metrics").is_dir():
                _read_mlflow_dir(Path(dirpath), meta, "params")
            if Path(dirpath).name == "tags" and (Path(dirpath).parent / "metrics").is_dir():
                _read_mlflow_dir(Path(dirpath), meta, "tags")
    else:
        folder = run_path.parent
        try:
            files = [p for p in sorted(folder.iterdir()) if p.is_file()][:MAX_WALK]
        except OSError:
            files = []
    for p in files:
        if "/params/" in p.as_posix() or "/tags/" in p.as_posix():
            continue
        if ENV_NAMES.match(p.name):
            _read_env_file(p, meta)
        elif is_config_or_env_file(p):
            _read_config_file(p, meta)
    log = log_file or (run_path if run_path.is_file() else None)
    if log is not None and log.is_file():
        _read_log_head(log, meta)
    return meta


def _text(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_FILE:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _load_structured(path: Path, text: str) -> Any:
    suffix = path.suffix.lower()
    if suffix == ".json":
        return json.loads(text)
    if suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_load(text)
    if suffix == ".toml":
        try:
            import tomllib  # type: ignore[import-not-found,unused-ignore]
        except ImportError:  # Python 3.10
            raise ValueError("TOML configs need Python 3.11 or later") from None
        return tomllib.loads(text)
    return _parse_key_values(text)


def _read_config_file(path: Path, meta: RunMeta) -> None:
    text = _text(path)
    if text is None:
        meta.notes.append(f"{path.name}: not read (larger than {MAX_FILE >> 20} MiB or unreadable)")
        return
    try:
        data = _load_structured(path, text)
    except Exception as exc:  # a malformed config is reported, never fatal
        meta.notes.append(f"{path.name}: not parsed ({type(exc).__name__}: {str(exc)[:120]})")
        return
    if isinstance(data, str) and "Namespace(" in data:
        data = parse_namespace(data) or {}
    if not isinstance(data, dict):
        return
    kind = "config"
    if _is_wandb_config(data):
        data = {
            k: v["value"] for k, v in data.items() if isinstance(v, dict) and "value" in v and k != "_wandb"
        }
        kind = "wandb config"
    flat = flatten(data)
    meta.add_config(flat, path.name)
    meta.sources.append(Source(str(path), kind))
    _commit_from_config(flat, meta)


def _is_wandb_config(data: dict[str, Any]) -> bool:
    vals = [v for k, v in data.items() if k not in ("wandb_version", "_wandb")]
    return bool(vals) and all(isinstance(v, dict) and "value" in v for v in vals)


def _read_mlflow_dir(folder: Path, meta: RunMeta, kind: str) -> None:
    values: dict[str, Any] = {}
    try:
        entries = sorted(p for p in folder.rglob("*") if p.is_file())[:MAX_KEYS]
    except OSError:
        return
    for p in entries:
        text = _text(p)
        if text is None:
            continue
        key = p.relative_to(folder).as_posix()
        values[key] = _scalar(text.strip()) if kind == "params" else text.strip()
    if kind == "params":
        meta.add_config(values, "mlflow params")
        meta.sources.append(Source(str(folder), "mlflow params"))
    else:
        commit = values.get("mlflow.source.git.commit")
        if isinstance(commit, str) and _HEX.match(commit):
            meta.commit = meta.commit or commit
        meta.sources.append(Source(str(folder), "mlflow tags"))


def _read_env_file(path: Path, meta: RunMeta) -> None:
    text = _text(path)
    if text is None:
        return
    name = path.name.lower()
    try:
        if name == "wandb-metadata.json":
            data = json.loads(text)
            for k in ("python", "os", "cuda", "gpu", "gpu_count", "host", "cpu_count"):
                if data.get(k) is not None:
                    meta.facts.setdefault(k, data[k])
            git = data.get("git") or {}
            if isinstance(git, dict) and isinstance(git.get("commit"), str):
                meta.commit = meta.commit or git["commit"]
            kind = "wandb metadata"
        elif name.endswith(".json"):
            data = json.loads(text)
            kind = _read_env_json(data, meta)
        elif name.endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text) or {}
            kind = "conda/env file"
            deps = data.get("dependencies", []) if isinstance(data, dict) else []
            for d in deps:
                if isinstance(d, str):
                    _package_line(d.replace("=", "==", 1) if "==" not in d else d, meta)
                elif isinstance(d, dict):
                    for line in d.get("pip", []) or []:
                        _package_line(str(line), meta)
            if isinstance(data, dict) and data.get("python"):
                meta.facts.setdefault("python", str(data["python"]))
        else:
            kind = "package list"
            for line in text.splitlines():
                _package_line(line, meta)
    except Exception as exc:  # a malformed environment file is reported, never fatal
        meta.notes.append(f"{path.name}: not parsed ({type(exc).__name__}: {str(exc)[:120]})")
        return
    meta.sources.append(Source(str(path), kind))


def _read_env_json(data: Any, meta: RunMeta) -> str:
    """trainsleuth environment_report output, or a plain {package: version} / {packages: {...}}."""
    if isinstance(data, dict) and isinstance(data.get("environments"), list) and data["environments"]:
        env = data["environments"][0]
        for k, v in (env.get("installed") or {}).items():
            meta.packages[_norm(k)] = str(v)
        py = (env.get("python") or {}).get("version")
        if py:
            meta.facts.setdefault("python", py)
        torch = env.get("torch") or {}
        for k in ("cuda", "cudnn", "nccl"):
            if torch.get(k):
                meta.facts.setdefault(k, torch[k])
        for k, v in (env.get("env") or {}).items():
            meta.facts.setdefault(f"env:{k}", v)
        return "trainsleuth environment report"
    if isinstance(data, dict):
        pk: dict[str, Any] = data["packages"] if isinstance(data.get("packages"), dict) else data
        for k, v in pk.items():
            if isinstance(v, (str, int, float)) and re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", str(k)):
                if k.lower() in ("python", "cuda", "cudnn", "nccl", "gpu", "os", "platform"):
                    meta.facts.setdefault(k.lower(), str(v))
                else:
                    meta.packages[_norm(k)] = str(v)
    return "environment file"


def _package_line(line: str, meta: RunMeta) -> None:
    m = _FREEZE.match(line)
    if m:
        name, op, version = m.groups()
        if op == "@":
            version = version.rsplit("/", 1)[-1][:60]
        meta.packages[_norm(name)] = version


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_NAMESPACE = re.compile(r"Namespace\((.*)\)\s*$")
_TRAINING_ARGS = re.compile(r"(\w*TrainingArguments|\w*Config)\(\s*$")


def parse_namespace(text: str) -> dict[str, Any] | None:
    """`Namespace(lr=0.1, name='x')` as printed by argparse -> dict (values read as literals only)."""
    for line in text.splitlines():
        m = _NAMESPACE.search(line.strip())
        if not m:
            continue
        try:
            call = ast.parse(f"f({m.group(1)})", mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(call, ast.Call):
            continue
        out: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg is None:
                continue
            try:
                out[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError, RecursionError):
                out[kw.arg] = ast.unparse(kw.value)[:200]
        return out
    return None


def _parse_key_values(text: str) -> Any:
    """`args.txt` style files: `Namespace(...)`, or one `key: value` / `key=value` per line."""
    if "Namespace(" in text:
        return text
    out: dict[str, Any] = {}
    for line in text.splitlines()[:MAX_KEYS]:
        m = re.match(r"^\s*(--)?([A-Za-z_][\w.\-/]*)\s*[:=]\s*(.*?)\s*,?\s*$", line)
        if m:
            out[m.group(2).replace("-", "_")] = _scalar(m.group(3))
    return out


def _scalar(text: str) -> Any:
    t = text.strip()
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    if t in ("None", "null", "~"):
        return None
    try:
        return ast.literal_eval(t)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return t[:300]


def _read_log_head(path: Path, meta: RunMeta) -> None:
    """Arguments printed at the top of a log: argparse Namespace, HF TrainingArguments(...),
    and a commit hash."""
    try:
        with path.open("rb") as fh:
            head = fh.read(MAX_LOG_HEAD).decode("utf-8", errors="replace")
    except OSError:
        return
    ns = parse_namespace(head)
    if ns:
        meta.add_config(ns, f"{path.name} (argparse Namespace)")
        meta.sources.append(Source(str(path), "argparse Namespace in the log"))
    lines = head.splitlines()
    for i, line in enumerate(lines):
        if _TRAINING_ARGS.search(line.strip()):
            block: dict[str, Any] = {}
            for sub in lines[i + 1 : i + 400]:
                if sub.strip().startswith(")"):
                    break
                m = re.match(r"^\s*(\w+)=(.*?),?\s*$", sub)
                if m:
                    block[m.group(1)] = _scalar(m.group(2))
            if block:
                meta.add_config(block, f"{path.name} ({line.strip()[:-1]})")
                meta.sources.append(Source(str(path), "TrainingArguments in the log"))
            break
    if meta.commit is None:
        for line in lines[:400]:
            m = _COMMIT_LINE.search(line)
            if m:
                meta.commit = m.group(1)
                break


def _commit_from_config(flat: dict[str, Any], meta: RunMeta) -> None:
    if meta.commit:
        return
    for k, v in flat.items():
        leaf = k.rsplit(".", 1)[-1].lower()
        commit_key = leaf in ("git_commit", "commit", "git_sha", "sha", "git_hash", "commit_hash")
        if commit_key and isinstance(v, str) and _HEX.match(v.strip()):
            meta.commit = v.strip()
            return


def flatten(data: Any, prefix: str = "", out: dict[str, Any] | None = None, depth: int = 0) -> dict[str, Any]:
    out = {} if out is None else out
    if isinstance(data, dict) and depth < 8:
        for k, v in data.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)
    elif prefix:
        if isinstance(data, (list, tuple)):
            data = list(data)[:50]
        elif isinstance(data, str) and _FLOATISH.match(data.strip()):
            data = float(data)  # YAML 1.1 reads 5e-05 (no dot) as a string
        out[prefix] = data
    return out


_FLOATISH = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


# ---------------------------------------------------------------------------- differences


@dataclass
class Difference:
    item: str
    good: Any
    bad: Any
    kind: str  # config | environment
    absent: str | None = None  # "good" | "bad": the run that does not record this item at all
    category: str = "other"
    failure_modes: list[str] = field(default_factory=list)
    score: float = 0.0
    why: str = ""


# Keys that differ between any two runs and say nothing about training.
_BOOKKEEPING = re.compile(
    r"^(output_dir|logging_dir|log_dir|save_dir|run_name|run_id|exp_name|experiment_name|project|entity|"
    r"group|job_type|notes|tags|report_to|hub_\w+|push_to_hub|timestamp|date|datetime|start_time|hostname|"
    r"host|user|username|wandb_\w+|mlflow\.\w+|logging_first_step|overwrite_output_dir|run_dir|out_dir|"
    r"ckpt_dir|checkpoint_dir|tensorboard_dir|name|id|_name_or_path|transformers_version)$",
    re.I,
)
_PATHISH = re.compile(r"(^|_)(path|dir|file|folder|root)s?$", re.I)
_PATH_MATTERS = re.compile(
    r"(data|dataset|train|valid|eval|tokenizer|vocab|checkpoint|ckpt|resume|init|pretrained|model)", re.I
)


def is_bookkeeping(key: str) -> bool:
    leaf = key.rsplit(".", 1)[-1]
    if _BOOKKEEPING.match(leaf) and (leaf not in ("name", "id") or "." not in key):
        return True
    return bool(_PATHISH.search(leaf)) and not _PATH_MATTERS.search(key)


_ALIASES = {
    "learning_rate": "lr",
    "base_lr": "lr",
    "max_lr": "lr",
    "peak_lr": "lr",
    "per_device_train_batch_size": "batch_size",
    "train_batch_size": "batch_size",
    "batch": "batch_size",
    "bsz": "batch_size",
    "gradient_accumulation_steps": "grad_accum",
    "accumulate_grad_batches": "grad_accum",
    "gradient_accumulation": "grad_accum",
    "max_grad_norm": "grad_clip",
    "clip_grad_norm": "grad_clip",
    "gradient_clip_val": "grad_clip",
    "clip_grad": "grad_clip",
    "lr_scheduler_type": "lr_schedule",
    "scheduler": "lr_schedule",
    "lr_scheduler": "lr_schedule",
    "warmup": "warmup_steps",
    "num_warmup_steps": "warmup_steps",
    "num_train_epochs": "epochs",
    "max_epochs": "epochs",
    "random_seed": "seed",
}


def _canonical(key: str) -> str:
    leaf = key.rsplit(".", 1)[-1].lower().replace("-", "_")
    return _ALIASES.get(leaf, leaf)


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:
        fa, fb = float(a), float(b)
        return abs(fa - fb) <= 1e-12 * max(abs(fa), abs(fb), 1e-300)
    except (TypeError, ValueError):
        return str(a).strip().lower() == str(b).strip().lower()


def diff_configs(good: dict[str, Any], bad: dict[str, Any]) -> tuple[list[Difference], int]:
    """Keys whose values differ (matched by full key, then by a canonical leaf name when it is unique
    on both sides); returns the differences and how many bookkeeping keys were left out."""
    out: list[Difference] = []
    skipped = 0
    only_good = [k for k in good if k not in bad]
    only_bad = [k for k in bad if k not in good]
    pairs = [(k, k) for k in good if k in bad]

    def index(keys: list[str]) -> dict[str, list[str]]:
        idx: dict[str, list[str]] = {}
        for k in keys:
            idx.setdefault(_canonical(k), []).append(k)
        return idx

    ig, ib = index(only_good), index(only_bad)
    for canon, g_keys in ig.items():
        b_keys = ib.get(canon)
        if b_keys and len(g_keys) == 1 and len(b_keys) == 1:
            pairs.append((g_keys[0], b_keys[0]))
            only_good.remove(g_keys[0])
            only_bad.remove(b_keys[0])
    for gk, bk in pairs:
        if _same(good[gk], bad[bk]):
            continue
        if is_bookkeeping(gk):
            skipped += 1
            continue
        item = gk if gk == bk else f"{gk} / {bk}"
        out.append(Difference(item=item, good=good[gk], bad=bad[bk], kind="config"))
    for k in only_good:
        if is_bookkeeping(k) or good[k] in (None, "", [], {}):
            skipped += 1
        else:
            out.append(Difference(item=k, good=good[k], bad=None, kind="config", absent="bad"))
    for k in only_bad:
        if is_bookkeeping(k) or bad[k] in (None, "", [], {}):
            skipped += 1
        else:
            out.append(Difference(item=k, good=None, bad=bad[k], kind="config", absent="good"))
    return out, skipped


def diff_environments(good: RunMeta, bad: RunMeta) -> list[Difference]:
    out: list[Difference] = []
    for k in sorted(set(good.facts) | set(bad.facts)):
        a, b = good.facts.get(k), bad.facts.get(k)
        if a is not None and b is not None and not _same(a, b):
            out.append(Difference(item=k, good=a, bad=b, kind="environment"))
    if good.packages and bad.packages:
        for name in sorted(set(good.packages) | set(bad.packages)):
            a, b = good.packages.get(name), bad.packages.get(name)
            if a != b:
                absent = "good" if a is None else ("bad" if b is None else None)
                out.append(
                    Difference(item=f"package:{name}", good=a, bad=b, kind="environment", absent=absent)
                )
    return out
