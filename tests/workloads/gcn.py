"""A two-layer graph convolutional network in plain torch (Kipf & Welling 2017, "Semi-Supervised
Classification with Graph Convolutional Networks"; after pytorch/examples gcn/main.py).

Node classification on a stochastic-block-model graph with bag-of-words features (a stand-in for
Cora): GraphConv layers compute A_hat @ (X W) with a sparse normalised adjacency (`torch.sparse.mm`),
ReLU and dropout 0.5 between them, log-softmax output, NLL on 20 labelled nodes per class, Adam
(lr 0.01, weight decay 5e-4), full batch. The health metric is validation accuracy (`val_acc`,
higher is better).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from synthetic import community_graph, normalized_adjacency
from torch import nn, optim


class GraphConv(nn.Module):
    def __init__(self, input_dim: int, output_dim: int, use_bias: bool = True) -> None:
        super().__init__()
        self.kernel = nn.Parameter(torch.empty(input_dim, output_dim))
        nn.init.xavier_normal_(self.kernel)
        self.bias = nn.Parameter(torch.zeros(output_dim)) if use_bias else None

    def forward(self, input_tensor: torch.Tensor, adj_mat: torch.Tensor) -> torch.Tensor:
        support = torch.mm(input_tensor, self.kernel)
        output = torch.sparse.mm(adj_mat, support)
        return output + self.bias if self.bias is not None else output


class GCN(nn.Module):
    def __init__(self, input_dim: int, hidden_dim: int, output_dim: int, dropout_p: float = 0.5) -> None:
        super().__init__()
        self.gc1 = GraphConv(input_dim, hidden_dim)
        self.gc2 = GraphConv(hidden_dim, output_dim)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x: torch.Tensor, adj_mat: torch.Tensor) -> torch.Tensor:
        x = self.dropout(F.relu(self.gc1(self.dropout(x), adj_mat)))
        return F.log_softmax(self.gc2(x, adj_mat), dim=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60, help="full-batch epochs")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--l2", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    adj, features, labels = community_graph(seed=1)
    adj_mat = normalized_adjacency(adj)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(2))
    idx_train = torch.cat([order[labels[order] == c][:20] for c in range(3)])
    idx_val = order[~torch.isin(order, idx_train)][:100]
    model = GCN(features.size(1), 16, 3)
    optimizer = optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.l2)

    def test(step: int) -> None:
        model.eval()
        with torch.no_grad():
            out = model(features, adj_mat)
        acc = (out[idx_val].argmax(1) == labels[idx_val]).float().mean()
        print(
            f"eval {step} val_acc={acc.item():.4f} val_loss={F.nll_loss(out[idx_val], labels[idx_val]).item():.4f}"
        )
        model.train()

    test(0)
    for step in range(1, args.steps + 1):
        optimizer.zero_grad()
        output = model(features, adj_mat)
        loss = F.nll_loss(output[idx_train], labels[idx_train])
        loss.backward()
        optimizer.step()
        print(f"step {step} loss={loss.item():.4f}")
        if step % 20 == 0:
            test(step)
    if args.steps % 20:
        test(args.steps)


if __name__ == "__main__":
    main()
