"""Synthetic seasonal series cut into (history, future) windows."""

import torch


class Windows(torch.utils.data.Dataset):
    def __init__(self, n, history, horizon, seed=0):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(history + horizon, dtype=torch.float32)
        phase = torch.rand(n, 1, generator=g) * 6.28
        amp = 1 + torch.rand(n, 1, generator=g)
        series = amp * torch.sin(t / 4 + phase) + 0.1 * torch.randn(n, history + horizon, generator=g)
        self.x = series[:, :history]
        self.y = series[:, history:]

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]
