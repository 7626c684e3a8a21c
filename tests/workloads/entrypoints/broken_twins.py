"""Probe entrypoints for the broken twins: `healthy.py`'s builders given each twin's buggy piece."""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import healthy

WORKLOADS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _twin(name: str) -> Any:
    """The broken twin's script as a module (its `__main__` block does not run)."""
    spec = importlib.util.spec_from_file_location(
        f"_twin_{name}", os.path.join(WORKLOADS, "broken", f"{name}.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dcgan_d_never_steps() -> dict[str, Any]:
    return healthy.dcgan(_twin("dcgan_d_never_steps").update_discriminator)


def wgan_gp_d_optimizer_over_g() -> dict[str, Any]:
    return healthy.wgan_gp(_twin("wgan_gp_d_optimizer_over_g").make_optimizers)


def dqn_target_is_online() -> dict[str, Any]:
    return healthy.dqn(_twin("dqn_target_is_online").make_target_net)


def vae_kl_wrong_sign() -> dict[str, Any]:
    return healthy.vae(_twin("vae_kl_wrong_sign").loss_function)


def actor_critic_advantage_not_detached() -> dict[str, Any]:
    return healthy.actor_critic(_twin("actor_critic_advantage_not_detached").actor_critic_losses)


def logreg_lbfgs_closure_no_zero_grad() -> dict[str, Any]:
    return healthy.logreg_lbfgs(_twin("logreg_lbfgs_closure_no_zero_grad").make_closure)


def sparse_embedding_not_in_optimizer() -> dict[str, Any]:
    return healthy.sparse_embedding_sparseadam(_twin("sparse_embedding_not_in_optimizer").make_optimizers)


def byol_target_trained_by_gradient() -> dict[str, Any]:
    return healthy.byol(copy.deepcopy, _twin("byol_target_trained_by_gradient").target_projection)


def mean_teacher_ema_never_updated() -> dict[str, Any]:
    return healthy.mean_teacher(_twin("mean_teacher_ema_never_updated").update_ema_variables)


def distillation_teacher_train_mode() -> dict[str, Any]:
    return healthy.distillation(_twin("distillation_teacher_train_mode").freeze_teacher)


BROKEN = [
    dcgan_d_never_steps, wgan_gp_d_optimizer_over_g, dqn_target_is_online, vae_kl_wrong_sign,
    actor_critic_advantage_not_detached, logreg_lbfgs_closure_no_zero_grad, sparse_embedding_not_in_optimizer,
    byol_target_trained_by_gradient, mean_teacher_ema_never_updated, distillation_teacher_train_mode,
]  # fmt: skip
