"""Train PPO from stable-baselines3 on gymnasium's CartPole-v1 on CPU.

verbose=1 prints SB3's own table of rollout/ and train/ values to stdout; the logger also writes
progress.csv. `python sb3_cartpole.py --out OUT [--steps 30000]`
"""

from __future__ import annotations

import argparse

from stable_baselines3 import PPO
from stable_baselines3.common.logger import configure


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=30000)
    a = p.parse_args()
    model = PPO("MlpPolicy", "CartPole-v1", verbose=1, seed=0, device="cpu")
    model.set_logger(configure(a.out, ["stdout", "csv"]))
    model.learn(total_timesteps=a.steps)


if __name__ == "__main__":
    main()
