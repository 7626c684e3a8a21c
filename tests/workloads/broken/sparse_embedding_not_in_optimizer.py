"""BROKEN twin of sparse_embedding_sparseadam.py: the sparse embedding is missing from every optimizer.

Bug: only the dense classifier's `Adam` is built (the `SparseAdam` for the embedding was dropped,
e.g. after `Adam` refused the sparse gradients). The embedding bag gets a sparse gradient on every
step and never changes: the model trains a linear layer on random fixed features and plateaus.

Module: `embedding` (the `EmbeddingBag(sparse=True)`).
Expected finding: `params_not_updated` on `embedding` (not `no_gradient`: its gradient is sparse, not
absent).
"""

from __future__ import annotations

import os
import sys

from torch import optim

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import sparse_embedding_sparseadam as workload


def make_optimizers(model: workload.TextClassifier, lr: float) -> list[optim.Optimizer]:
    return [optim.Adam(model.fc.parameters(), lr=lr)]  # BUG: no optimizer for model.embedding


if __name__ == "__main__":
    workload.main(make_optimizers=make_optimizers)
