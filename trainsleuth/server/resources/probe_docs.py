"""How to call the probe (the user's command, a scaffolded script, an entrypoint), as the MCP resource `probe://entrypoint`.

An assistant should not have to learn the contract from error messages: this text is what
`probe_gradients` expects, with examples for the usual shapes of training code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from trainsleuth.server.context import ServerContext

ENTRYPOINT_TEXT = """\
# probe_gradients: your training command (or an entrypoint)

## Route 1: the command you run (`command`): start here

    probe_gradients(command="python scripts/train.py --config configs/base.yaml")
    probe_gradients(command="torchrun --nproc_per_node 2 train.py", steps=4, start=100)
    trainsleuth probe --steps 8 -- python train.py --config configs/base.yaml

runs the command exactly as given (also `accelerate launch ...`, `python -m pkg.train`, a shell
script) in the project's interpreter, in a scratch copy of the workspace (checkpoints and logs it
writes land there; your files are left as found). An observer injected into every Python process it
starts finds the optimizers and the models they train (HF `Trainer`, Lightning, a `Trainer(cfg).fit()`
class, DDP and torch.compile wrappers, AMP and gradient accumulation included), watches optimizer
steps `start .. start+steps-1` (default 1..8) of the real loop, then stops the run. No adapter, no
replay, no fixed batch. One call gives, per parameter (named as in `model.named_parameters()`,
prefixed by the model's name when several models train): the gradient norm at each observed step as
the optimizer sees it (exactly zero is its own finding), the update size, whether any optimizer holds
it, requires_grad; per module: gradient, update and activation scale; buffers and frozen tensors that
changed; the first NaN/Inf's module and operation (forward, loss code or backward); loss and lr per
step; and the findings, with a dead set named as a whole ("every weight of blocks.*.attn gets exactly
0 gradient ...; proj_qkv and proj_out are all-zero: a product of zeros never moves"). The observed
batches change from step to step, so a loss that does not go down is not judged (a rising or
non-finite one is); what could not be seen (inside compiled code, say) is said in `notes`. Pass a
small config so the run reaches its first steps quickly; `timeout_s` covers start-up.

## Route 2: a training script through a scaffold (`scaffold`)

    probe_gradients(scaffold="train.py", script_args=["--batch_size=4", "--compile=False"])
    trainsleuth probe --scaffold train.py --script-args='--batch_size=4 --compile=False'

writes `.trainsleuth/scratch/probe_train.py` (git-ignored; writable at every protocol phase) and
probes it. Its `make()` runs `train.py` with those arguments until the first `optimizer.step()`,
stops it there (the step is not taken) and hands the probe the model, the optimizer and its LR
scheduler, the batch the model last saw, and the script's own loss: the model's `.loss` /
`(logits, loss)` output, or the criterion or `torch.nn.functional` loss it called on the output,
with the script's constant factor (e.g. `/ gradient_accumulation_steps`). Works for plain PyTorch
loops, nanoGPT-style scripts and Hugging Face `Trainer` scripts. When the loss is built from the
output with other code, the probe answers `scaffold_incomplete` with the script lines that build it:
write `loss_fn` in the scaffold file and set `LOSS_FN = loss_fn`. Prefer `command` for a script.

## Route 3: an entrypoint function (A/B tests of a hypothesis)

`entrypoint` is `path/to/file.py:function` (relative to the workspace) or `package.module:function`.
The model runs a few real steps (default 8) on one fixed batch, in the project's own interpreter, in
a subprocess: what one change does, side by side. The function takes no arguments and returns a mapping:

| key | required | meaning |
|---|---|---|
| `model` | yes | a `torch.nn.Module` |
| `batch` or `batches` | yes | one batch, or a list (the first is the fixed batch; the others get forward-only passes for activation statistics) |
| `loss_fn` | no | `loss_fn(model, batch)` returns a scalar loss (or a dict of named scalar terms) |
| `optimizer` | no | a `torch.optim.Optimizer`; with it the probe takes real steps and measures updates |
| `scheduler` | no | the LR scheduler; stepped after each optimizer step (a warmup starts at lr 0) |
| `step_fn` | no | `step_fn(model, batch)` is the user's own complete step (zero_grad, backward, optimizer and scheduler steps, accumulation) and returns the loss; the probe observes it and checks gradient accumulation against one large batch |
| `eval_fn` | no | `eval_fn(model, batch)` is the user's evaluation step; the probe checks that dropout and batch norm are in eval mode during it |

Without `loss_fn` and `step_fn` the probe calls `model(**batch)` for a dict batch (else
`model(*batch)` / `model(batch)`) and takes `.loss`, `["loss"]`, a scalar output or the one scalar
in a tuple. `loss_fn` may be given beside `step_fn`: it is then the large-batch reference for the
accumulation check. With `step_fn`, micro-batches must be slices of the batch it is given.

```python
# probe_entry.py
import torch
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

def make():
    model = BertForSequenceClassification(BertConfig(num_labels=3, num_hidden_layers=2))
    batch = {"input_ids": torch.randint(0, 1000, (8, 32)), "labels": torch.randint(0, 3, (8,))}
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    return {"model": model, "batch": batch, "optimizer": opt,
            "scheduler": get_linear_schedule_with_warmup(opt, 100, 10000)}
```

Checks beyond gradients: labels all equal to `ignore_index`, labels outside `[0, C)`
(stopped before the kernel), probabilities given to a loss that expects logits, normalisation over
the wrong axis, a prediction broadcast against its target ((B, 1) vs (B,)), the first loss against
-log(1/C), eval mode during training, dropout during evaluation, accumulation (`step_fn`). Codes:
`findings.md` and its Additions.
"""


def register(server: MCPServer, ctx: ServerContext) -> None:
    @server.resource(
        "probe://entrypoint",
        name="probe-entrypoint",
        title="probe_gradients: your training command, a script, or an entrypoint",
        description="What probe_gradients takes: the training command you run, a script to scaffold, or an entrypoint function.",
        mime_type="text/markdown",
    )
    def entrypoint_resource() -> str:
        return ENTRYPOINT_TEXT
