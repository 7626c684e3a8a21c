"""PPO with a clipped surrogate and GAE on a point-reaching task (Schulman et al. 2017, "Proximal
Policy Optimization Algorithms"; loop after CleanRL's ppo.py, scaled down).

16 vectorised environments, rollouts of 32 steps, generalised advantage estimation (gamma 0.95,
lambda 0.95), advantages normalised per minibatch, 4 epochs of 4 minibatches per rollout, separate
actor and critic MLPs (tanh, orthogonal init), value loss 0.5, entropy bonus 0.01, gradient norm
clipped at 0.5, Adam(eps 1e-5). The loss is not meant to go down; the health metric is the mean
return on fixed evaluation episodes (`eval_return`, higher is better).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch import nn, optim
from torch.distributions import Categorical
from toy_envs import PointReach, mean_episode_return


def layer_init(layer: nn.Linear, std: float = 2**0.5) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.zeros_(layer.bias)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )  # fmt: skip
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )  # fmt: skip

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        dist = Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.get_value(x)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30, help="rollouts (one PPO update each)")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--num-steps", type=int, default=32)
    parser.add_argument("--update-epochs", type=int, default=4)
    parser.add_argument("--minibatches", type=int, default=4)
    parser.add_argument("--lr", type=float, default=2.5e-3)
    parser.add_argument("--gamma", type=float, default=0.95)
    parser.add_argument("--gae-lambda", type=float, default=0.95)
    parser.add_argument("--clip-coef", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    envs = PointReach(n=args.num_envs, seed=args.seed)
    agent = Agent(envs.obs_dim, envs.n_actions)
    optimizer = optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    shape = (args.num_steps, args.num_envs)
    obs_buf = torch.zeros((*shape, envs.obs_dim))
    actions, logprobs = torch.zeros(shape, dtype=torch.long), torch.zeros(shape)
    rewards, dones, values = torch.zeros(shape), torch.zeros(shape), torch.zeros(shape)

    def evaluate(step: int) -> None:
        g = torch.Generator().manual_seed(5)

        def act(obs: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                probs = torch.softmax(agent.actor(torch.from_numpy(obs)), dim=-1)
            return torch.multinomial(probs, 1, generator=g).squeeze(1).numpy()

        print(f"eval {step} eval_return={mean_episode_return(PointReach(n=128, seed=7), act):.4f}")

    evaluate(0)
    next_obs, next_done = torch.from_numpy(envs.reset()), torch.zeros(args.num_envs)
    for step in range(1, args.steps + 1):
        for t in range(args.num_steps):
            obs_buf[t], dones[t] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            actions[t], logprobs[t], values[t] = action, logprob, value
            obs_np, reward, done = envs.step(action.numpy())
            rewards[t] = torch.from_numpy(reward)
            next_obs, next_done = torch.from_numpy(obs_np), torch.from_numpy(done.astype(np.float32))

        with torch.no_grad():  # generalised advantage estimation
            next_value = agent.get_value(next_obs)
            advantages = torch.zeros(shape)
            lastgaelam = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                nonterminal = 1.0 - (next_done if t == args.num_steps - 1 else dones[t + 1])
                next_v = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * next_v * nonterminal - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * nonterminal * lastgaelam
                advantages[t] = lastgaelam
            returns = advantages + values

        b_obs, b_actions = obs_buf.reshape(-1, envs.obs_dim), actions.reshape(-1)
        b_logprobs, b_adv, b_returns = logprobs.reshape(-1), advantages.reshape(-1), returns.reshape(-1)
        batch_size = b_obs.size(0)
        mb_size = batch_size // args.minibatches
        for _ in range(args.update_epochs):
            perm = torch.randperm(batch_size)
            for start in range(0, batch_size, mb_size):
                mb = perm[start : start + mb_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions[mb])
                ratio = (newlogprob - b_logprobs[mb]).exp()
                mb_adv = (b_adv[mb] - b_adv[mb].mean()) / (b_adv[mb].std() + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                ).mean()
                v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()
                loss = pg_loss - 0.01 * entropy.mean() + 0.5 * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
        print(
            f"step {step} loss={loss.item():.4f} pg_loss={pg_loss.item():.4f} v_loss={v_loss.item():.4f} "
            f"reward={rewards.mean().item():.4f}"
        )
    evaluate(args.steps)


if __name__ == "__main__":
    main()
