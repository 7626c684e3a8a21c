"""Small environments for the reinforcement-learning workloads, written in numpy (no gym).

Each one follows the usual `reset() -> obs` / `step(actions) -> (obs, rewards, dones)` shape over a
batch of `n` independent copies, and resets a finished copy on its own, as vectorised gym
environments do. They are small enough that a policy learns them in a few dozen updates.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class GoalCorridor:
    """A corridor of `length` cells; the goal is at the left or right end, and the observation says which.

    Observation: (position scaled to [-1, 1], goal side as -1 or +1, one-hot position).
    Actions: 0 = left, 1 = right. Reward: -0.05 a step, +1 at the goal end, -1 at the other end.
    An episode ends at either end or after `2 * length` steps.
    """

    n_actions = 2

    def __init__(self, n: int = 1, length: int = 7, seed: int = 0) -> None:
        self.n, self.length = n, length
        self.obs_dim = 2 + length
        self.rng = np.random.RandomState(seed)
        self.pos = np.zeros(n, dtype=np.int64)
        self.goal = np.zeros(n, dtype=np.int64)
        self.t = np.zeros(n, dtype=np.int64)

    def _obs(self) -> np.ndarray:
        onehot = np.eye(self.length, dtype=np.float32)[self.pos]
        scaled = (self.pos / (self.length - 1) * 2 - 1).astype(np.float32)
        side = (self.goal * 2 - 1).astype(np.float32)
        return np.concatenate([scaled[:, None], side[:, None], onehot], axis=1)

    def _reset_where(self, mask: np.ndarray) -> None:
        self.pos[mask] = self.length // 2
        self.goal[mask] = self.rng.randint(0, 2, size=int(mask.sum()))
        self.t[mask] = 0

    def reset(self) -> np.ndarray:
        self._reset_where(np.ones(self.n, dtype=bool))
        return self._obs()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.pos = self.pos + np.where(np.asarray(actions) == 1, 1, -1)
        self.t += 1
        at_right, at_left = self.pos >= self.length - 1, self.pos <= 0
        reached = np.where(self.goal == 1, at_right, at_left)
        wrong = np.where(self.goal == 1, at_left, at_right)
        rewards = -0.05 + reached * 1.0 - wrong * 1.0
        dones = reached | wrong | (self.t >= 2 * self.length)
        self.pos = np.clip(self.pos, 0, self.length - 1)
        self._reset_where(dones)
        return self._obs(), rewards.astype(np.float32), dones


class PointReach:
    """A point in the unit square moves towards a random goal with four discrete moves of 0.1.

    Observation: (x, y, goal_x - x, goal_y - y). Reward: minus the distance to the goal after the
    move, and +1 when within 0.1 of it (the episode then ends); at most `max_steps` moves.
    """

    n_actions = 4
    obs_dim = 4
    MOVES = np.array([[0.1, 0.0], [-0.1, 0.0], [0.0, 0.1], [0.0, -0.1]], dtype=np.float32)

    def __init__(self, n: int = 1, max_steps: int = 20, seed: int = 0) -> None:
        self.n, self.max_steps = n, max_steps
        self.rng = np.random.RandomState(seed)
        self.pos = np.zeros((n, 2), dtype=np.float32)
        self.goal = np.zeros((n, 2), dtype=np.float32)
        self.t = np.zeros(n, dtype=np.int64)

    def _obs(self) -> np.ndarray:
        return np.concatenate([self.pos, self.goal - self.pos], axis=1).astype(np.float32)

    def _reset_where(self, mask: np.ndarray) -> None:
        k = int(mask.sum())
        self.pos[mask] = self.rng.uniform(-1, 1, size=(k, 2))
        self.goal[mask] = self.rng.uniform(-1, 1, size=(k, 2))
        self.t[mask] = 0

    def reset(self) -> np.ndarray:
        self._reset_where(np.ones(self.n, dtype=bool))
        return self._obs()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.pos = np.clip(self.pos + self.MOVES[np.asarray(actions)], -1, 1)
        self.t += 1
        dist = np.linalg.norm(self.goal - self.pos, axis=1)
        reached = dist < 0.1
        rewards = -dist + reached * 1.0
        dones = reached | (self.t >= self.max_steps)
        self._reset_where(dones)
        return self._obs(), rewards.astype(np.float32), dones


def mean_episode_return(env: GoalCorridor | PointReach, act: Callable[[np.ndarray], np.ndarray]) -> float:
    """The mean return of the first episode of each of the env's copies under the policy `act`."""
    obs = env.reset()
    totals = np.zeros(env.n, dtype=np.float64)
    running = np.ones(env.n, dtype=bool)
    while running.any():
        obs, rewards, dones = env.step(act(obs))
        totals += rewards * running
        running &= ~dones
    return float(totals.mean())


def discounted_returns(rewards: list[float], gamma: float) -> list[float]:
    """R_t = r_t + gamma * R_{t+1} for every step of one episode."""
    R, out = 0.0, []
    for r in reversed(rewards):
        R = r + gamma * R
        out.insert(0, R)
    return out
