"""One-network actor-critic on a goal corridor (after pytorch/examples
reinforcement_learning/actor_critic.py).

The example's model: a shared Linear-128 body with an action head (softmax) and a value head; the
advantage R - V(s) uses the value as a constant (`value.item()`), so the policy loss does not train
the critic; the critic's own loss is smooth L1 to the return. Adam 1e-2, one update per batch of
episodes. The summed loss rises and falls with the policy; the health metric is the mean return on
fixed evaluation episodes (`eval_return`, higher is better).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.distributions import Categorical
from toy_envs import GoalCorridor, discounted_returns, mean_episode_return


class Policy(nn.Module):
    """Actor and critic in one model."""

    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.affine1 = nn.Linear(obs_dim, 128)
        self.action_head = nn.Linear(128, n_actions)
        self.value_head = nn.Linear(128, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = F.relu(self.affine1(x))
        return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


def actor_critic_losses(
    log_probs: list[torch.Tensor], values: list[torch.Tensor], returns: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    policy_losses, value_losses = [], []
    for log_prob, value, R in zip(log_probs, values, returns, strict=True):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, R.view(1)))
    return torch.stack(policy_losses).sum(), torch.stack(value_losses).sum()


LossFunction = Callable[
    [list[torch.Tensor], list[torch.Tensor], torch.Tensor], tuple[torch.Tensor, torch.Tensor]
]


def main(argv: list[str] | None = None, actor_critic_losses: LossFunction = actor_critic_losses) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40, help="updates")
    parser.add_argument("--episodes", type=int, default=8, help="episodes per update")
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    env = GoalCorridor(n=1, seed=args.seed)
    model = Policy(env.obs_dim, env.n_actions)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    def evaluate(step: int) -> None:
        g = torch.Generator().manual_seed(5)

        def act(obs: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return torch.multinomial(model(torch.from_numpy(obs))[0], 1, generator=g).squeeze(1).numpy()

        print(f"eval {step} eval_return={mean_episode_return(GoalCorridor(n=128, seed=7), act):.4f}")

    evaluate(0)
    for step in range(1, args.steps + 1):
        log_probs: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        returns: list[float] = []
        episode_rewards = []
        for _ in range(args.episodes):
            state, rewards, done = env.reset(), [], False
            while not done:
                probs, value = model(torch.from_numpy(state[0]))
                m = Categorical(probs)
                action = m.sample()
                log_probs.append(m.log_prob(action))
                values.append(value)
                state, reward, dones = env.step(np.array([action.item()]))
                rewards.append(float(reward[0]))
                done = bool(dones[0])
            returns.extend(discounted_returns(rewards, args.gamma))
            episode_rewards.append(sum(rewards))

        optimizer.zero_grad()
        policy_loss, value_loss = actor_critic_losses(log_probs, values, torch.tensor(returns))
        loss = (policy_loss + value_loss) / len(returns)
        loss.backward()
        optimizer.step()
        print(
            f"step {step} loss={loss.item():.4f} policy_loss={policy_loss.item() / len(returns):.4f} "
            f"value_loss={value_loss.item() / len(returns):.4f} reward={np.mean(episode_rewards):.4f}"
        )
    evaluate(args.steps)


if __name__ == "__main__":
    main()
