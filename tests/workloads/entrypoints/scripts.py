"""Probe entrypoints for the workloads the script capture reaches as they are (no hand-written builder).

Each function runs its script from `tests/workloads/` until the first `optimizer.step()` and hands the
probe what it saw there (`_ts_script.capture`, what `trainsleuth probe --scaffold` writes): the model,
the optimizer and scheduler, the batch the model last saw and the script's own loss. The probe then
takes its steps on that batch. The other workloads need several optimizers, closures, episodes or
updates by hand, which a capture at the first step cannot replay: `healthy.py` builds those.
"""

from __future__ import annotations

import os
import sys
from typing import Any

WORKLOADS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNERS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(WORKLOADS))), "trainsleuth", "tools", "runners"
)


def _capture(name: str) -> dict[str, Any]:
    if RUNNERS not in sys.path:
        sys.path.insert(0, RUNNERS)
    if WORKLOADS not in sys.path:
        sys.path.insert(0, WORKLOADS)
    import _ts_script

    return dict(_ts_script.capture(os.path.join(WORKLOADS, f"{name}.py"), []))


def beta_vae() -> dict[str, Any]:
    return _capture("beta_vae")


def ddpm() -> dict[str, Any]:
    return _capture("ddpm")


def simclr() -> dict[str, Any]:
    return _capture("simclr")


def clip_infonce() -> dict[str, Any]:
    return _capture("clip_infonce")


def polynomial_regression() -> dict[str, Any]:
    return _capture("polynomial_regression")


def super_resolution() -> dict[str, Any]:
    return _capture("super_resolution")


def siamese() -> dict[str, Any]:
    return _capture("siamese")


def triplet() -> dict[str, Any]:
    return _capture("triplet")


def sparse_embedding_sgd() -> dict[str, Any]:
    return _capture("sparse_embedding_sgd")


def wide_and_deep() -> dict[str, Any]:
    return _capture("wide_and_deep")


def rmsprop_mlp() -> dict[str, Any]:
    return _capture("rmsprop_mlp")


def sgd_nesterov_onecycle() -> dict[str, Any]:
    return _capture("sgd_nesterov_onecycle")


def mnist_adadelta() -> dict[str, Any]:
    return _capture("mnist_adadelta")


def tied_autoencoder() -> dict[str, Any]:
    return _capture("tied_autoencoder")


SCRIPTS = [
    beta_vae, ddpm, simclr, clip_infonce, polynomial_regression, super_resolution, siamese, triplet,
    sparse_embedding_sgd, wide_and_deep, rmsprop_mlp, sgd_nesterov_onecycle, mnist_adadelta, tied_autoencoder,
]  # fmt: skip
