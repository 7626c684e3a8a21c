"""REINFORCE on a goal corridor (after pytorch/examples reinforcement_learning/reinforce.py).

The example's policy (Linear-128, dropout 0.6, ReLU, Linear, softmax), Adam 1e-2, discounted returns
normalised to zero mean and unit variance as the baseline. One update per batch of 8 episodes (the
example takes one episode per update on CartPole; the corridor's episodes are a few moves long). The
loss is -sum(log_prob * normalised return): it is not meant to go down. The health metric is the
policy's mean episode return on fixed evaluation episodes (`eval_return`, higher is better).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.distributions import Categorical
from toy_envs import GoalCorridor, discounted_returns, mean_episode_return


class Policy(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.affine1 = nn.Linear(obs_dim, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, n_actions)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.dropout(self.affine1(x)))
        return F.softmax(self.affine2(x), dim=-1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40, help="policy updates")
    parser.add_argument("--episodes", type=int, default=8, help="episodes per update")
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    env = GoalCorridor(n=1, seed=args.seed)
    policy = Policy(env.obs_dim, env.n_actions)
    optimizer = optim.Adam(policy.parameters(), lr=args.lr)
    eps = np.finfo(np.float32).eps.item()

    def evaluate(step: int) -> None:
        policy.eval()
        g = torch.Generator().manual_seed(5)

        def act(obs: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return torch.multinomial(policy(torch.from_numpy(obs)), 1, generator=g).squeeze(1).numpy()

        print(f"eval {step} eval_return={mean_episode_return(GoalCorridor(n=128, seed=7), act):.4f}")
        policy.train()

    evaluate(0)
    for step in range(1, args.steps + 1):
        log_probs, returns, episode_rewards = [], [], []
        for _ in range(args.episodes):
            state, rewards, done = env.reset(), [], False
            while not done:
                m = Categorical(policy(torch.from_numpy(state[0])))
                action = m.sample()
                log_probs.append(m.log_prob(action))
                state, reward, dones = env.step(np.array([action.item()]))
                rewards.append(float(reward[0]))
                done = bool(dones[0])
            returns.extend(discounted_returns(rewards, args.gamma))
            episode_rewards.append(sum(rewards))
        returns_t = torch.tensor(returns)
        returns_t = (returns_t - returns_t.mean()) / (returns_t.std() + eps)
        optimizer.zero_grad()
        policy_loss = torch.stack([-lp * R for lp, R in zip(log_probs, returns_t, strict=True)]).sum()
        policy_loss.backward()
        optimizer.step()
        print(f"step {step} loss={policy_loss.item():.4f} reward={np.mean(episode_rewards):.4f}")
    evaluate(args.steps)


if __name__ == "__main__":
    main()
