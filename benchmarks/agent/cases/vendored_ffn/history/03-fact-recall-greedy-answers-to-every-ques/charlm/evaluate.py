"""Evaluation: validation loss and fact recall (greedy answers to the corpus' questions)."""

from __future__ import annotations

import math

import torch
from lmblocks import TransformerLM

from charlm.corpus import RELATIONS, Corpus
from charlm.data import TokenStream
from charlm.tokenizer import CharTokenizer


@torch.no_grad()
def eval_loss(model: TransformerLM, stream: TokenStream, batch_size: int, max_batches: int) -> float:
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for x, y in stream.sequential(batch_size, max_batches):
        total += model(x, labels=y).loss.item() * x.numel()
        count += x.numel()
    model.train(was_training)
    return total / max(count, 1)


@torch.no_grad()
def fact_accuracy(
    model: TransformerLM, corpus: Corpus, tokenizer: CharTokenizer, relations: tuple[str, ...] = RELATIONS
) -> dict[str, float]:
    """Share of questions whose greedy answer is exactly right, per relation and overall."""
    was_training = model.training
    model.eval()
    scores: dict[str, float] = {}
    for relation in relations:
        pairs = corpus.questions(relation)
        prompts = [tokenizer.encode(q) for q, _ in pairs]
        width = max(len(p) for p in prompts)
        correct = 0
        for length in sorted({len(p) for p in prompts}):  # batch prompts of equal length
            idx = [i for i, p in enumerate(prompts) if len(p) == length]
            ids = torch.tensor([prompts[i] for i in idx])
            answer_len = max(len(pairs[i][1]) for i in idx)
            out = model.generate(ids, answer_len, greedy=True)
            for row, i in enumerate(idx):
                got = tokenizer.decode(out[row, length:].tolist())
                correct += got[: len(pairs[i][1])] == pairs[i][1]
        scores[relation] = correct / len(pairs)
        assert width >= 0
    scores["all"] = sum(scores[r] for r in relations) / len(relations)
    model.train(was_training)
    return scores


def perplexity(loss: float) -> float:
    return math.exp(min(loss, 50.0))
