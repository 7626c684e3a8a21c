"""Where does the loss come from? Loss on the answer tokens of each relation vs the template text.

The template words are learned in the first hundred steps; what is left of the validation loss
after that is mostly the facts. Splitting the loss this way shows whether a model is learning the
facts or only the text around them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from lmblocks import TransformerLM

from charlm.corpus import QUESTIONS, RELATIONS, Corpus
from charlm.tokenizer import CharTokenizer


@torch.no_grad()
def answer_loss(model: TransformerLM, corpus: Corpus, tokenizer: CharTokenizer) -> dict[str, float]:
    """Mean next-token loss on the answer characters of every question, per relation; and on the
    question characters themselves (``template``) for comparison."""
    was_training = model.training
    model.eval()
    out: dict[str, float] = {}
    template_total, template_count = 0.0, 0
    for relation in RELATIONS:
        total, count = 0.0, 0
        for person in corpus.people:
            question = QUESTIONS[relation].format(name=person.name)
            answer = " " + person.value(relation) + "."
            ids = torch.tensor([tokenizer.encode(question + answer)])
            logits = model(ids[:, :-1]).logits[0]
            losses = F.cross_entropy(logits.float(), ids[0, 1:], reduction="none")
            q_len = len(question)
            total += losses[q_len - 1 :].sum().item()
            count += losses[q_len - 1 :].numel()
            template_total += losses[: q_len - 1].sum().item()
            template_count += losses[: q_len - 1].numel()
        out[relation] = total / count
    out["template"] = template_total / max(template_count, 1)
    model.train(was_training)
    return out


def format_breakdown(losses: dict[str, float]) -> str:
    return "  ".join(f"{k} {v:.3f}" for k, v in losses.items())
