"""Suggestions follow the problem's domain (issue 22 item 4): 23 symptom texts from different
domains, each in a small repository written the way such projects are written; the top 3
suggestions never come from a domain the case does not have, and at least one is a right one.

The ground truth here (`domains`, `right`) is the test's own, written from what each failure
mode is about, not read back from the implementation's tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from trainsleuth.knowledge.catalog import checklists, failure_modes
from trainsleuth.knowledge.lookup import suggest_for_symptom
from trainsleuth.knowledge.relevance import gather, repo_signals

# Which domain each domain-specific entry belongs to, written independently of relevance.py.
DOMAIN_OF = {
    **{fid: "rl" for fid, fm in failure_modes().items() if fm.topic == "rl-fine-tuning"},
    **{fid: "codebook" for fid, fm in failure_modes().items() if fm.topic == "discrete-codebooks"},
    **{fid: "distributed" for fid, fm in failure_modes().items() if fm.topic == "distributed"},
    **{fid: "mixed_precision" for fid, fm in failure_modes().items() if fm.topic == "mixed-precision"},
    **{fid: "performance" for fid, fm in failure_modes().items() if fm.topic == "performance-and-hangs"},
    "fp16-overflow": "mixed_precision",
    "bf16-accumulation": "mixed_precision",
    "padding-in-loss": "sequence",
    "attention-logit-growth": "attention",
    "optimizer-state-not-restored": "checkpoint",
    "resume-data-position": "checkpoint",
    "checkpoint-key-mismatch": "checkpoint",
    "reward": "rl",
    "distributed-correctness": "distributed",
    "mixed-precision": "mixed_precision",
    "hangs-and-performance": "performance",
}

TABULAR = """\
import pandas as pd
import torch
from torch import nn

df = pd.read_csv("houses.csv")
x = torch.tensor(df.drop(columns=["price"]).values, dtype=torch.float32)
y = torch.tensor(df["price"].values, dtype=torch.float32).unsqueeze(1)
model = nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(100):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""
GPT_FP16 = """\
import torch
from torch import nn
from model import GPT

model = GPT(vocab_size=50257, n_layer=12, n_head=12).cuda()
scaler = torch.cuda.amp.GradScaler()
opt = torch.optim.AdamW(model.parameters(), lr=6e-4)
for step, (idx, targets) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        logits = model(idx)
        loss = nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    scaler.scale(loss).backward(); scaler.step(opt); scaler.update(); opt.zero_grad()
"""
GPT_MODEL = """\
import torch
from torch import nn

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)

class GPT(nn.Module):
    def __init__(self, vocab_size, n_layer, n_head, n_embd=768):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
"""
BERT_CLS = """\
from transformers import AutoModelForSequenceClassification, AutoTokenizer
import torch

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
opt = torch.optim.AdamW(model.classifier.parameters(), lr=2e-5)
for batch in loader:
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
    out.loss.backward(); opt.step(); opt.zero_grad()
"""
RESUME = """\
import torch
model = Net(); opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-4, total_steps=10000)
if args.resume:
    ckpt = torch.load(args.resume)
    model.load_state_dict(ckpt["model"])
for step in range(start, 10000):
    loss = model(next(it)).loss
    loss.backward(); opt.step(); sched.step(); opt.zero_grad()
    if step % 1000 == 0:
        torch.save({"model": model.state_dict(), "step": step}, "ckpt.pt")
"""
DDP = """\
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
rank = int(os.environ["LOCAL_RANK"])
model = DDP(Net().cuda(rank), device_ids=[rank])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward(); opt.step(); opt.zero_grad()
"""
PPO = """\
from trl import PPOConfig, PPOTrainer, AutoModelForCausalLMWithValueHead
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLMWithValueHead.from_pretrained("gpt2")
ref_model = AutoModelForCausalLMWithValueHead.from_pretrained("gpt2")
trainer = PPOTrainer(PPOConfig(learning_rate=1.4e-5), model, ref_model, tokenizer)
for batch in trainer.dataloader:
    response = trainer.generate(batch["input_ids"])
    rewards = reward_model(response)
    stats = trainer.step(batch["input_ids"], response, rewards)
"""
GRPO = """\
from trl import GRPOConfig, GRPOTrainer

def reward_fn(completions, **kwargs):
    return [1.0 if c.strip().endswith("42") else 0.0 for c in completions]

trainer = GRPOTrainer(model="Qwen/Qwen2-0.5B", reward_funcs=reward_fn, args=GRPOConfig(num_generations=8))
trainer.train()
"""
VQVAE = """\
import torch
from torch import nn
import torchvision

class VectorQuantizer(nn.Module):
    def __init__(self, num_codes=1024, dim=64, commitment_cost=0.25):
        super().__init__()
        self.codebook = nn.Embedding(num_codes, dim)

class VQVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nn.ReLU())
        self.vq = VectorQuantizer()
"""
RESNET = """\
import torch
import torchvision
from torchvision import transforms

train = torchvision.datasets.CIFAR10("data", train=True, transform=transforms.ToTensor())
model = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for epoch in range(30):
    for x, y in torch.utils.data.DataLoader(train, batch_size=128, num_workers=0):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
    acc = evaluate(model, test_loader)
"""
PLAIN_MLP = """\
import torch
from torch import nn

model = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = []
for step, (x, y) in enumerate(loader):
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    history.append(loss)
"""
LLAMA_LORA = """\
from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model
import torch

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16)
model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
opt = torch.optim.AdamW(model.base_model.parameters(), lr=1e-4)
"""
SEQ2SEQ = """\
import torch
from torch import nn

class Seq2Seq(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, 256, padding_idx=0)
        self.rnn = nn.GRU(256, 256, batch_first=True)

def loss_fn(logits, targets):
    return nn.functional.cross_entropy(logits.transpose(1, 2), targets)  # pads included
"""
LSTM_LM = """\
import torch
from torch import nn

class LSTMLM(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, 512)
        self.lstm = nn.LSTM(512, 512, num_layers=3)
        self.out = nn.Linear(512, vocab)
opt = torch.optim.SGD(LSTMLM(10000).parameters(), lr=20.0)
"""
FRAUD = """\
import pandas as pd
import torch
from sklearn.model_selection import train_test_split

df = pd.read_csv("transactions.csv")
X_train, X_test, y_train, y_test = train_test_split(df.drop(columns="is_fraud"), df["is_fraud"])
model = torch.nn.Sequential(torch.nn.Linear(30, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
loss_fn = torch.nn.CrossEntropyLoss()
"""
BF16 = """\
import torch
model = Net().cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for x, y in loader:
    loss = model(x.cuda().bfloat16(), y.cuda()).loss
    loss.backward(); opt.step(); opt.zero_grad()
"""
PRETRAIN = """\
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

model = LlamaForCausalLM(LlamaConfig(hidden_size=2048, num_hidden_layers=16))
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95))
for step, batch in enumerate(loader):
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward(); opt.step(); opt.zero_grad()
"""


@dataclass
class Case:
    name: str
    files: dict[str, str]
    symptom: str
    domains: set[str]  # the domains this problem really has
    right: set[str]  # at least one of these belongs in the top 3
    wrong: set[str] = field(default_factory=set)  # general entries that clearly do not fit


CASES = [
    Case(
        "tabular-plateau",
        {"train.py": TABULAR},
        "Validation RMSE of my house-price regressor plateaus after the first epoch; the training loss "
        "stops improving and the metric is flat.",
        {"tabular", "regression"},
        {
            "lr-too-low",
            "input-not-normalised",
            "training-loop",
            "data-pipeline",
            "lr-schedule-misconfigured",
            "label-errors",
            "activation-saturation",
            "dead-relu",
        },
    ),
    Case(
        "gpt-fp16-nan",
        {"train.py": GPT_FP16, "model.py": GPT_MODEL},
        "The loss becomes NaN around step 3000 when training the GPT with fp16 autocast.",
        {"sequence", "attention", "mixed_precision", "numerics"},
        {
            "fp16-overflow",
            "numerical-correctness",
            "mixed-precision",
            "fp16-loss-scaling",
            "unstable-softmax",
            "log-of-zero",
            "attention-logit-growth",
        },
    ),
    Case(
        "bert-chance",
        {"finetune.py": BERT_CLS},
        "Fine-tuned BERT classifier stays at 50% accuracy (chance) on SST-2; the training loss is flat at 0.693.",
        {"sequence", "attention", "classification", "adapter"},
        {
            "label-errors",
            "lr-too-low",
            "frozen-parameters",
            "params-missing-from-optimizer",
            "model-adapter",
            "training-loop",
            "accidental-detach",
            "class-imbalance",
        },
    ),
    Case(
        "resume-jump",
        {"train.py": RESUME},
        "After resuming from the checkpoint the loss jumps from 1.9 to 3.5 and the learning rate starts "
        "the warmup again.",
        {"checkpoint"},
        {"optimizer-state-not-restored", "lr-schedule-misconfigured", "resume-data-position"},
    ),
    Case(
        "ddp-worse",
        {"train.py": DDP},
        "Training with 2 GPUs under DDP reaches a worse loss than one GPU with the same global batch size.",
        {"distributed", "classification"},
        {
            "distributed-correctness",
            "ddp-no-sync-misuse",
            "grad-accumulation-scaling",
            "rank-dependent-randomness",
            "unsynced-frozen-weights",
            "batch-size-noise",
        },
    ),
    Case(
        "nccl-hang",
        {"train.py": DDP},
        "The job hangs at the first all_reduce after evaluation, which runs on rank 0 only; the NCCL "
        "watchdog times out after 30 minutes.",
        {"distributed", "performance", "classification"},
        {
            "collective-timeout",
            "barrier-mismatch",
            "rank-only-collective",
            "distributed-correctness",
            "hangs-and-performance",
        },
    ),
    Case(
        "ppo-entropy",
        {"rl.py": PPO},
        "PPO policy entropy drops to zero within 200 updates and the reward plateaus; generations are "
        "repetitive.",
        {"rl", "sequence", "attention", "adapter"},
        {"rl-entropy-collapse", "reward", "reward-hacking", "rl-kl-collapse"},
    ),
    Case(
        "grpo-zero",
        {"grpo.py": GRPO},
        "GRPO training: loss and grad norm are exactly zero on most steps; all completions of a prompt get "
        "the same reward.",
        {"rl"},
        {"zero-variance-advantages", "reward", "reward-scale"},
    ),
    Case(
        "vq-collapse",
        {"vqvae.py": VQVAE},
        "The VQ-VAE uses only 12 of its 1024 codebook entries and the reconstruction stops improving.",
        {"codebook", "vision"},
        {"codebook-collapse", "low-codebook-perplexity"},
    ),
    Case(
        "eval-gap",
        {"train.py": RESNET},
        "ResNet on CIFAR-10: validation accuracy is far below training accuracy from the first epoch, even "
        "when I evaluate on the training images.",
        {"vision", "classification"},
        {
            "train-eval-mode",
            "data-leakage",
            "overfitting-regularisation",
            "data-pipeline",
            "input-not-normalised",
        },
    ),
    Case(
        "slow-loader",
        {"train.py": RESNET},
        "GPU utilization is 30% and training runs at 2 it/s; the dataloader decodes JPEGs with num_workers=0.",
        {"vision", "classification", "performance"},
        {"dataloader-bottleneck", "hangs-and-performance", "host-device-sync"},
    ),
    Case(
        "memory-growth",
        {"train.py": PLAIN_MLP},
        "Memory grows every step until CUDA out of memory after about 500 steps; I append the loss to a "
        "list for logging.",
        {"performance", "classification"},
        {"retained-graph-memory", "out-of-memory", "hangs-and-performance"},
    ),
    Case(
        "grad-accum",
        {"train.py": PLAIN_MLP},
        "With gradient accumulation over 8 micro-batches the loss is 8 times larger and training diverges, "
        "compared with an 8 times larger batch.",
        {"classification", "numerics"},
        {"grad-accumulation-scaling", "loss-reduction-mismatch", "missing-zero-grad"},
    ),
    Case(
        "version-bump",
        {"finetune.py": BERT_CLS},
        "After upgrading transformers from 4.38 to 4.40 the same script trains to a much higher loss.",
        {"versions", "sequence", "attention", "classification", "adapter"},
        {"version-regression", "configuration"},
    ),
    Case(
        "fraud-imbalance",
        {"train.py": FRAUD},
        "The fraud classifier predicts only the majority class: recall on fraud is 0 with 1% positives.",
        {"classification", "tabular"},
        {"class-imbalance", "label-errors", "data-pipeline"},
    ),
    Case(
        "lora-frozen",
        {"lora.py": LLAMA_LORA},
        "LoRA adapters on Llama: the loss does not change at all and the adapter weights stay at their "
        "initial values.",
        {"adapter", "sequence", "attention", "mixed_precision"},
        {
            "frozen-parameters",
            "params-missing-from-optimizer",
            "model-adapter",
            "no-grad-in-training",
            "accidental-detach",
            "training-loop",
        },
    ),
    Case(
        "padding",
        {"model.py": SEQ2SEQ},
        "Perplexity of my seq2seq model looks too good and changes with the amount of padding in the batch.",
        {"sequence", "classification"},
        {"padding-in-loss", "loss-reduction-mismatch"},
    ),
    Case(
        "bf16-late",
        {"train.py": BF16},
        "Training in bf16 the loss is noticeably worse than in fp32 late in training; small updates seem "
        "to get lost.",
        {"mixed_precision"},
        {"bf16-accumulation", "reduced-precision-reductions", "mixed-precision", "numerical-correctness"},
    ),
    Case(
        "llm-spikes",
        {"pretrain.py": PRETRAIN},
        "Pretraining a 1B transformer: the loss spikes every few thousand steps, with grad norm spikes right "
        "before each one.",
        {"attention", "sequence", "numerics"},
        {"attention-logit-growth", "adam-epsilon-instability", "missing-grad-clipping", "corrupt-samples"},
    ),
    Case(
        "lstm-explode",
        {"lm.py": LSTM_LM},
        "LSTM language model: the gradient norm explodes to 1e6 after a few hundred steps and the loss "
        "becomes inf.",
        {"sequence", "numerics"},
        {"missing-grad-clipping", "lr-too-high", "numerical-correctness"},
    ),
    Case(
        "no-zero-grad",
        {"train.py": PLAIN_MLP},
        "The loss decreases for a few steps and then explodes; the gradient norm grows every step even with "
        "a tiny learning rate.",
        {"classification", "numerics"},
        {"missing-zero-grad", "grad-accumulation-scaling", "lr-too-high"},
    ),
    Case(
        "no-shuffle",
        {"train.py": PLAIN_MLP},
        "Validation loss oscillates with a period of exactly one epoch, and the training loss drops at every "
        "epoch boundary because the data is not shuffled.",
        {"classification"},
        {"no-shuffling", "data-pipeline"},
    ),
    Case(
        "tabular-nan",
        {"train.py": TABULAR},
        "The loss is NaN from the first step in my tabular model; some features have zero variance and I "
        "standardize them.",
        {"tabular", "regression", "numerics"},
        {"division-by-zero", "input-not-normalised", "corrupt-samples", "numerical-correctness"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_top_three_fit_the_domain(case: Case, tmp_path: Path) -> None:
    for rel, text in case.files.items():
        (tmp_path / rel).write_text(text)
    top = suggest_for_symptom(tmp_path, case.symptom, 5)[:3]
    ids = [s["id"] for s in top]
    assert len(ids) == 3, top
    foreign = [i for i in ids if i in DOMAIN_OF and DOMAIN_OF[i] not in case.domains]
    assert not foreign, f"{case.name}: {foreign} come from a domain the case does not have; top 3 {ids}"
    assert set(ids) & case.right, f"{case.name}: none of {sorted(case.right)} in the top 3 {ids}"


def test_every_domain_entry_is_classified() -> None:
    """Every domain-specific catalog entry and checklist is known to the test's own table, so no new
    entry slips through the domain check unseen."""
    from trainsleuth.knowledge.relevance import needs_of

    for fid, fm in failure_modes().items():
        if needs_of("failure_mode", fid, fm.topic) not in (
            None,
            "numerics",
            "checkpoint",
            "versions",
            "sequence",
            "attention",
            "classification",
        ):
            assert fid in DOMAIN_OF, fid
    for name in checklists():
        if needs_of("checklist", name) in ("rl", "distributed", "mixed_precision", "performance"):
            assert name in DOMAIN_OF, name


def test_signals_name_where_they_come_from(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(DDP)
    sig = repo_signals(tmp_path)
    assert sig.has("distributed")
    assert any(w.startswith("train.py:") for w in sig.domains["distributed"])
    assert not sig.has("rl") and not sig.has("codebook")
    both = gather(tmp_path, "reward plateaus", ["loss", "kl"])
    assert both.has("rl") and both.has("distributed")
    assert any("kl" in w for w in both.domains["rl"]) or any("reward" in w for w in both.domains["rl"])


def test_a_domain_entry_carries_its_reason(tmp_path: Path) -> None:
    (tmp_path / "vqvae.py").write_text(VQVAE)
    top = suggest_for_symptom(tmp_path, "codebook usage collapses to a few codes", 3)
    vq = next(s for s in top if s["id"] == "codebook-collapse")
    assert "codebook" in vq["why"] and "vqvae.py" in vq["why"]


def test_repository_scan_skips_environments_and_is_bounded(tmp_path: Path) -> None:
    venv = tmp_path / ".venv" / "lib" / "site-packages" / "trl"
    venv.mkdir(parents=True)
    (venv / "ppo.py").write_text(PPO)  # a library in the environment is not the user's project
    (tmp_path / "train.py").write_text(TABULAR)
    sig = repo_signals(tmp_path)
    assert not sig.has("rl") and sig.has("tabular")


def test_finding_links_follow_what_the_log_records() -> None:
    from trainsleuth.knowledge.links import failure_modes_for
    from trainsleuth.knowledge.relevance import relevant_failure_modes

    everything = failure_modes_for("plateau")
    assert {"rl-entropy-collapse", "codebook-collapse"} <= set(everything)
    regressor = relevant_failure_modes("plateau", ["train_loss", "val_rmse", "lr"])
    assert not {"rl-entropy-collapse", "codebook-collapse"} & set(regressor)
    assert regressor[0] == everything[0] == "lr-too-low"
    ppo = relevant_failure_modes("plateau", ["loss", "reward", "kl", "entropy"])
    assert "rl-entropy-collapse" in ppo and "codebook-collapse" not in ppo
    vq = relevant_failure_modes("constant_metric", ["recon_loss", "codebook_perplexity"])
    assert "codebook-collapse" in vq and "rl-kl-collapse" not in vq
