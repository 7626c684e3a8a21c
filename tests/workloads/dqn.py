"""DQN with experience replay and a target network on a goal corridor (Mnih et al. 2015; loop after
the PyTorch "Reinforcement Learning (DQN) Tutorial" and CleanRL's dqn.py, scaled down).

An MLP Q-network, a replay buffer, epsilon-greedy exploration decaying from 1 to 0.05, the Huber loss
between Q(s, a) and r + gamma * max_a' Q_target(s', a') computed without gradient, Adam 1e-3, and a
target network that is a separate copy refreshed from the online network every `--target-every`
updates. The TD loss rises whenever the target is refreshed; the health metric is the greedy
policy's mean return on fixed evaluation episodes (`eval_return`, higher is better).
"""

from __future__ import annotations

import argparse
import copy
import random
from collections import deque
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from toy_envs import GoalCorridor, mean_episode_return


class DQN(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.layer1 = nn.Linear(obs_dim, 64)
        self.layer2 = nn.Linear(64, 64)
        self.layer3 = nn.Linear(64, n_actions)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer3(F.relu(self.layer2(F.relu(self.layer1(x)))))


def make_target_net(policy_net: nn.Module) -> nn.Module:
    """The target network: a separate copy of the online network, never trained by gradient."""
    target_net = copy.deepcopy(policy_net)
    target_net.requires_grad_(False)
    return target_net


def main(
    argv: list[str] | None = None, make_target_net: Callable[[nn.Module], nn.Module] = make_target_net
) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--steps", type=int, default=150, help="gradient updates (each after one step of 8 envs)"
    )
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--target-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)

    envs = GoalCorridor(n=args.num_envs, seed=args.seed)
    policy_net = DQN(envs.obs_dim, envs.n_actions)
    target_net = make_target_net(policy_net)
    optimizer = optim.Adam(policy_net.parameters(), lr=args.lr)
    memory: deque[tuple[np.ndarray, int, float, np.ndarray, bool]] = deque(maxlen=10000)

    def greedy(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return policy_net(torch.from_numpy(obs)).argmax(dim=1).numpy()

    def evaluate(step: int) -> None:
        print(f"eval {step} eval_return={mean_episode_return(GoalCorridor(n=128, seed=7), greedy):.4f}")

    evaluate(0)
    obs = envs.reset()
    for step in range(1, args.steps + 1):
        epsilon = max(0.05, 1.0 - step / (0.5 * args.steps))
        explore = np.random.rand(args.num_envs) < epsilon
        actions = np.where(explore, np.random.randint(0, envs.n_actions, args.num_envs), greedy(obs))
        next_obs, rewards, dones = envs.step(actions)
        for i in range(args.num_envs):
            memory.append((obs[i], int(actions[i]), float(rewards[i]), next_obs[i], bool(dones[i])))
        obs = next_obs
        if len(memory) < args.batch_size:
            continue

        batch = random.sample(memory, args.batch_size)
        states = torch.from_numpy(np.stack([b[0] for b in batch]))
        action_b = torch.tensor([b[1] for b in batch])
        reward_b = torch.tensor([b[2] for b in batch])
        next_states = torch.from_numpy(np.stack([b[3] for b in batch]))
        done_b = torch.tensor([b[4] for b in batch], dtype=torch.float32)

        state_action_values = policy_net(states).gather(1, action_b.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_values = target_net(next_states).max(dim=1).values
        expected = reward_b + args.gamma * next_values * (1 - done_b)
        loss = F.smooth_l1_loss(state_action_values, expected)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()

        if step % args.target_every == 0:
            target_net.load_state_dict(policy_net.state_dict())
        print(
            f"step {step} loss={loss.item():.4f} epsilon={epsilon:.3f} q_mean={state_action_values.mean().item():.4f}"
        )
    evaluate(args.steps)


if __name__ == "__main__":
    main()
