"""BROKEN twin of dqn.py: the "target network" is the online network itself.

Bug: `target_net = policy_net` (an alias, not a copy; e.g. written instead of `copy.deepcopy`, or a
`load_state_dict` into the same object). The TD target r + gamma * max Q_target(s') is computed by
the very network being trained, so it moves with every update; the periodic "copy" is a no-op. The
target is still computed under `no_grad`, so no gradient flows through it and nothing crashes.

Module: `policy_net` (its forward under `no_grad` serves as the target: there is no separate copy).
Expected finding: none of findings.md fits; PROPOSED new code `target_network_shared` ("a target/EMA
network used under no_grad is the same object, or shares its parameters, with the network being
trained"), on `policy_net`.
"""

from __future__ import annotations

import os
import sys

from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import dqn


def make_target_net(policy_net: nn.Module) -> nn.Module:
    return policy_net  # BUG: an alias, not a copy


if __name__ == "__main__":
    dqn.main(make_target_net=make_target_net)
