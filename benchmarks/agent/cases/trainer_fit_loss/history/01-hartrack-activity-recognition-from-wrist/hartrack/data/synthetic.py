"""Synthetic wrist-IMU recordings with activity labels and heart rate, for development and CI.

Each subject has a resting heart rate, a fitness factor and a sensor orientation (how the watch
sits on the wrist). A window is 4 s of 3-axis accelerometer + 3-axis gyroscope at 32 Hz; its heart
rate rises with the activity's intensity and the motion's amplitude. The resting heart rate is not
observable from motion, so even a perfect model keeps an error of a few bpm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

ACTIVITIES = ("sitting", "standing", "walking", "running", "cycling", "stairs")
# (step frequency in Hz, motion amplitude in g, heart-rate increase over rest in bpm, gravity axis)
PROFILES = {
    "sitting": (0.0, 0.02, 3.0, (0.0, 0.6, 0.8)),
    "standing": (0.0, 0.03, 10.0, (0.0, 1.0, 0.0)),
    "walking": (1.8, 0.35, 30.0, (0.1, 0.95, 0.2)),
    "running": (2.7, 0.9, 75.0, (0.2, 0.9, 0.3)),
    "cycling": (1.2, 0.25, 50.0, (0.6, 0.5, 0.6)),
    "stairs": (1.5, 0.45, 55.0, (0.1, 0.9, 0.4)),
}
SAMPLE_RATE = 32
WINDOW = 128


@dataclass
class Recording:
    x: torch.Tensor  # (N, 6, WINDOW) float32
    activity: torch.Tensor  # (N,) int64
    hr: torch.Tensor  # (N,) float32, beats per minute
    subject: torch.Tensor  # (N,) int64


def _rotation(gen: torch.Generator, max_angle: float) -> torch.Tensor:
    angles = (torch.rand(3, generator=gen) * 2 - 1) * max_angle
    cx, cy, cz = torch.cos(angles)
    sx, sy, sz = torch.sin(angles)
    rx = torch.tensor([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = torch.tensor([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = torch.tensor([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


def make_recordings(
    n_subjects: int = 20, windows_per_subject: int = 150, seed: int = 0, noise: float = 0.05
) -> Recording:
    gen = torch.Generator().manual_seed(seed)
    n = windows_per_subject
    t = torch.arange(WINDOW, dtype=torch.float32) / SAMPLE_RATE
    freq = torch.tensor([PROFILES[a][0] for a in ACTIVITIES])
    amp = torch.tensor([PROFILES[a][1] for a in ACTIVITIES])
    increase = torch.tensor([PROFILES[a][2] for a in ACTIVITIES])
    gravity = torch.tensor([PROFILES[a][3] for a in ACTIVITIES])
    xs, acts, hrs, subs = [], [], [], []
    for subject in range(n_subjects):
        rest = 58 + 16 * torch.rand((), generator=gen)
        fitness = 0.8 + 0.4 * torch.rand((), generator=gen)  # < 1: fitter, smaller increase
        placement = _rotation(gen, math.radians(20))
        a = torch.randint(len(ACTIVITIES), (n,), generator=gen)
        intensity = 0.7 + 0.6 * torch.rand(n, generator=gen)  # effort within the activity
        f = freq[a] * (0.9 + 0.2 * torch.rand(n, generator=gen)) * (0.8 + 0.2 * intensity)
        phase = 2 * math.pi * torch.rand(n, 3, generator=gen)
        axis_mix = torch.rand(n, 3, generator=gen) + 0.2
        arg = 2 * math.pi * f[:, None, None] * t[None, None]  # (n, 1, T)
        moving = (freq[a] > 0).float()[:, None, None]
        wave = torch.sin(arg + phase[..., None]) + 0.3 * torch.sin(2 * arg + 2 * phase[..., None])
        scale = (amp[a] * intensity)[:, None, None]
        acc = gravity[a][..., None] + moving * scale * axis_mix[..., None] * wave
        gyro = moving * 2.5 * scale * torch.cos(arg + phase.flip(1)[..., None])
        acc = placement @ acc + noise * torch.randn(n, 3, WINDOW, generator=gen)
        gyro = placement @ gyro + noise * torch.randn(n, 3, WINDOW, generator=gen)
        hr = rest + fitness * increase[a] * intensity + 3.0 * torch.randn(n, generator=gen)
        xs.append(torch.cat([acc, gyro], dim=1))
        acts.append(a)
        hrs.append(hr)
        subs.append(torch.full((n,), subject))
    return Recording(
        x=torch.cat(xs).float(),
        activity=torch.cat(acts),
        hr=torch.cat(hrs).float(),
        subject=torch.cat(subs),
    )
