"""BROKEN twin of actor_critic.py: the advantage is not detached, so the policy loss trains the critic.

Bug: `advantage = R - value` instead of `R - value.item()` (or `.detach()`). The policy-gradient term
-log_prob * advantage now also differentiates through V(s): the value head is pushed to make the
advantage of likely actions large, against its own regression loss. Training runs and the return may
even rise for a while; the critic's estimates are biased.

Module: `value_head` (the critic; it receives gradient from the policy loss term).
Expected finding: none of findings.md fits; PROPOSED new code `advantage_not_detached` ("the
advantage/baseline in a policy-gradient loss carries gradient into the critic or baseline network"),
on `value_head`.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import actor_critic


def actor_critic_losses(
    log_probs: list[torch.Tensor], values: list[torch.Tensor], returns: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    policy_losses, value_losses = [], []
    for log_prob, value, R in zip(log_probs, values, returns, strict=True):
        advantage = R - value.squeeze()  # BUG: should be R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, R.view(1)))
    return torch.stack(policy_losses).sum(), torch.stack(value_losses).sum()


if __name__ == "__main__":
    actor_critic.main(actor_critic_losses=actor_critic_losses)
