"""Probe entrypoints (`trainsleuth probe FILE.py:FUNCTION`) for workloads the scaffold cannot reach.

`trainsleuth probe --scaffold tests/workloads/<name>.py` turns half of the corpus into an entrypoint by
itself; the others (several optimizers, RL, L-BFGS closures, updates by hand, losses built from
several model calls) are written here by hand, each rebuilding its workload's model, optimizer(s)
and one training step as a `step_fn`, with the workload's own classes. The probe takes its steps on
one fixed batch: supervised steps use it; GAN, RL and self-supervised steps draw their own noise,
episodes and augmentations as the scripts do. Separate networks (G and D, online and target, student
and teacher) go in one `nn.ModuleDict` named as the script names them, so findings name them the same.
Each builder takes the piece its broken twin replaces; `broken.py` passes the buggy one.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import actor_critic as ac_mod
import byol as byol_mod
import dcgan as dcgan_mod
import distillation as distill_mod
import dqn as dqn_mod
import fast_neural_style as fns_mod
import gcn as gcn_mod
import logreg_lbfgs as logreg_mod
import lstm_language_model as lm_mod
import lstm_sine_lbfgs as sine_mod
import mean_teacher as mt_mod
import multitask_uncertainty as mtu_mod
import ppo as ppo_mod
import reinforce as reinforce_mod
import sparse_embedding_sparseadam as sparse_mod
import style_transfer as style_mod
import tied_lm as tied_mod
import vae as vae_mod
import vae_kl_warmup as warmup_mod
import wgan_gp as wgan_mod
from synthetic import (
    batchify,
    binary_patterns,
    blob_images,
    clusters,
    community_graph,
    gaussian_ring,
    markov_text,
    normalized_adjacency,
    smooth_images,
    template_images,
)
from toy_envs import GoalCorridor, PointReach, discounted_returns

Contract = dict[str, Any]


# ------------------------------------------------------------------------------------ adversarial


def dcgan(update_discriminator: Callable[..., float] = dcgan_mod.update_discriminator) -> Contract:
    torch.manual_seed(0)
    netG, netD = dcgan_mod.Generator(), dcgan_mod.Discriminator()
    netG.apply(dcgan_mod.weights_init)
    netD.apply(dcgan_mod.weights_init)
    optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    criterion = nn.BCELoss()

    def step_fn(model: nn.ModuleDict, real: torch.Tensor) -> dict[str, torch.Tensor]:
        fake = model["netG"](torch.randn(real.size(0), dcgan_mod.NZ, 1, 1))
        err_d = update_discriminator(model["netD"], optimizerD, criterion, real, fake)
        model["netG"].zero_grad()
        err_g = criterion(model["netD"](fake), torch.ones(real.size(0)))
        err_g.backward()
        optimizerG.step()
        return {"loss_d": torch.tensor(err_d), "loss_g": err_g.detach()}

    model = nn.ModuleDict({"netG": netG, "netD": netD})
    return {"model": model, "batches": [blob_images(64, seed=s) for s in (1, 2, 3)], "step_fn": step_fn}


def wgan_gp(
    make_optimizers: Callable[..., tuple[optim.Optimizer, optim.Optimizer]] = wgan_mod.make_optimizers,
) -> Contract:
    torch.manual_seed(0)
    netG, netD = wgan_mod.mlp(wgan_mod.NZ, 2), wgan_mod.mlp(2, 1)
    optimizerD, optimizerG = make_optimizers(netG, netD, 5e-4)

    def step_fn(model: nn.ModuleDict, real: torch.Tensor) -> dict[str, torch.Tensor]:
        for _ in range(5):
            loss_d, _ = wgan_mod.critic_step(model["netD"], model["netG"], optimizerD, real, 0.1)
        optimizerG.zero_grad()
        loss_g = -model["netD"](model["netG"](torch.randn(real.size(0), wgan_mod.NZ))).mean()
        loss_g.backward()
        optimizerG.step()
        return {"loss_d": torch.tensor(loss_d), "loss_g": loss_g.detach()}

    model = nn.ModuleDict({"netG": netG, "netD": netD})
    return {"model": model, "batches": [gaussian_ring(128, seed=s) for s in (1, 2, 3)], "step_fn": step_fn}


# ------------------------------------------------------------------------------------------- KL


def vae(loss_function: Callable[..., torch.Tensor] = vae_mod.loss_function) -> Contract:
    torch.manual_seed(0)
    model = vae_mod.VAE()
    optimizer = optim.Adam(model.parameters(), lr=1e-3)

    def loss_fn(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
        recon, mu, logvar = m(x)
        return loss_function(recon, x, mu, logvar)

    batches = [binary_patterns(64, vae_mod.DIM, seed=s) for s in (1, 2, 3)]
    return {"model": model, "batches": batches, "loss_fn": loss_fn, "optimizer": optimizer}


def vae_kl_warmup() -> Contract:
    torch.manual_seed(0)
    model = warmup_mod.GaussianVAE()
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    state = {"step": 0}

    def step_fn(m: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
        state["step"] += 1
        kl_weight = min(1.0, state["step"] / 40)
        optimizer.zero_grad()
        rec, kl = warmup_mod.terms(m, x)
        (rec + kl_weight * kl).backward()
        optimizer.step()
        return {"rec": rec.detach(), "kl": (kl_weight * kl).detach()}

    batches = [clusters(64, warmup_mod.DIM, classes=6, spread=0.3, seed=s)[0] for s in (1, 2, 3)]
    return {"model": model, "batches": batches, "step_fn": step_fn, "optimizer": optimizer}


# ------------------------------------------------------------------------------------------- RL


def _episode(env: GoalCorridor, policy: Callable[[torch.Tensor], Any]) -> tuple[list[Any], list[float]]:
    state, outputs, rewards, done = env.reset(), [], [], False
    while not done:
        out = policy(torch.from_numpy(state[0]))
        outputs.append(out)
        state, reward, dones = env.step(np.array([out[0].item()]))
        rewards.append(float(reward[0]))
        done = bool(dones[0])
    return outputs, rewards


def reinforce() -> Contract:
    torch.manual_seed(0)
    env = GoalCorridor(n=1, seed=0)
    model = reinforce_mod.Policy(env.obs_dim, env.n_actions)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    def step_fn(m: nn.Module, _obs: torch.Tensor) -> torch.Tensor:
        log_probs, returns = [], []
        for _ in range(8):

            def act(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                dist = torch.distributions.Categorical(m(s))
                a = dist.sample()
                return a, dist.log_prob(a)

            outputs, rewards = _episode(env, act)
            log_probs += [lp for _, lp in outputs]
            returns += discounted_returns(rewards, 0.99)
        r = torch.tensor(returns)
        r = (r - r.mean()) / (r.std() + 1e-7)
        optimizer.zero_grad()
        loss = torch.stack([-lp * R for lp, R in zip(log_probs, r, strict=True)]).sum()
        loss.backward()
        optimizer.step()
        return loss.detach()

    obs = torch.from_numpy(GoalCorridor(n=16, seed=3).reset())
    return {"model": model, "batch": obs, "step_fn": step_fn, "optimizer": optimizer}


def actor_critic(
    actor_critic_losses: Callable[..., tuple[torch.Tensor, torch.Tensor]] = ac_mod.actor_critic_losses,
) -> Contract:
    torch.manual_seed(0)
    env = GoalCorridor(n=1, seed=0)
    model = ac_mod.Policy(env.obs_dim, env.n_actions)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    def step_fn(m: nn.Module, _obs: torch.Tensor) -> dict[str, torch.Tensor]:
        log_probs, values, returns = [], [], []
        for _ in range(8):

            def act(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
                probs, value = m(s)
                dist = torch.distributions.Categorical(probs)
                a = dist.sample()
                return a, dist.log_prob(a), value

            outputs, rewards = _episode(env, act)
            log_probs += [o[1] for o in outputs]
            values += [o[2] for o in outputs]
            returns += discounted_returns(rewards, 0.99)
        optimizer.zero_grad()
        policy_loss, value_loss = actor_critic_losses(log_probs, values, torch.tensor(returns))
        n = len(returns)
        ((policy_loss + value_loss) / n).backward()
        optimizer.step()
        return {"policy": (policy_loss / n).detach(), "value": (value_loss / n).detach()}

    obs = torch.from_numpy(GoalCorridor(n=16, seed=3).reset())
    return {"model": model, "batch": obs, "step_fn": step_fn, "optimizer": optimizer}


def ppo() -> Contract:
    torch.manual_seed(0)
    envs = PointReach(n=16, seed=0)
    agent = ppo_mod.Agent(envs.obs_dim, envs.n_actions)
    optimizer = optim.Adam(agent.parameters(), lr=2.5e-3, eps=1e-5)
    state = {"obs": torch.from_numpy(envs.reset())}

    def step_fn(m: nn.Module, _obs: torch.Tensor) -> torch.Tensor:
        obs_l, act_l, logp_l, rew_l, done_l, val_l = [], [], [], [], [], []
        for _ in range(32):
            with torch.no_grad():
                action, logprob, _, value = m.get_action_and_value(state["obs"])
            obs_l.append(state["obs"])
            o, r, d = envs.step(action.numpy())
            act_l.append(action), logp_l.append(logprob), val_l.append(value)
            rew_l.append(torch.from_numpy(r)), done_l.append(torch.from_numpy(d.astype(np.float32)))
            state["obs"] = torch.from_numpy(o)
        with torch.no_grad():
            next_v = m.get_value(state["obs"])
            adv, last = torch.zeros(32, 16), torch.zeros(16)
            for t in reversed(range(32)):
                nv = next_v if t == 31 else val_l[t + 1]
                nonterminal = 1.0 - done_l[t]
                delta = rew_l[t] + 0.95 * nv * nonterminal - val_l[t]
                last = delta + 0.95 * 0.95 * nonterminal * last
                adv[t] = last
            ret = adv + torch.stack(val_l)
        b_obs, b_act, b_logp = torch.cat(obs_l), torch.cat(act_l), torch.cat(logp_l)
        b_adv, b_ret = adv.reshape(-1), ret.reshape(-1)
        for _ in range(4):
            perm = torch.randperm(512)
            for start in range(0, 512, 128):
                mb = perm[start : start + 128]
                _, newlogp, entropy, newv = m.get_action_and_value(b_obs[mb], b_act[mb])
                ratio = (newlogp - b_logp[mb]).exp()
                a = (b_adv[mb] - b_adv[mb].mean()) / (b_adv[mb].std() + 1e-8)
                pg = torch.max(-a * ratio, -a * torch.clamp(ratio, 0.8, 1.2)).mean()
                loss = pg - 0.01 * entropy.mean() + 0.5 * 0.5 * ((newv - b_ret[mb]) ** 2).mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(m.parameters(), 0.5)
                optimizer.step()
        return loss.detach()

    obs = torch.from_numpy(PointReach(n=16, seed=3).reset())
    return {"model": agent, "batch": obs, "step_fn": step_fn, "optimizer": optimizer}


def dqn(make_target_net: Callable[[nn.Module], nn.Module] = dqn_mod.make_target_net) -> Contract:
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    envs = GoalCorridor(n=8, seed=0)
    policy_net = dqn_mod.DQN(envs.obs_dim, envs.n_actions)
    target_net = make_target_net(policy_net)
    optimizer = optim.Adam(policy_net.parameters(), lr=1e-3)
    memory: list[tuple[np.ndarray, int, float, np.ndarray, bool]] = []
    state = {"obs": envs.reset(), "step": 0}
    while len(memory) < 256:  # warm the replay buffer with random moves, as the script's first updates do
        a = rng.randint(0, 2, 8)
        nxt, r, d = envs.step(a)
        memory += [(state["obs"][i], int(a[i]), float(r[i]), nxt[i], bool(d[i])) for i in range(8)]
        state["obs"] = nxt

    def step_fn(model: nn.ModuleDict, _obs: torch.Tensor) -> torch.Tensor:
        online, target = model["policy_net"], model["target_net"]
        state["step"] += 1
        with torch.no_grad():
            greedy = online(torch.from_numpy(state["obs"])).argmax(1).numpy()
        a = np.where(rng.rand(8) < 0.3, rng.randint(0, 2, 8), greedy)
        nxt, r, d = envs.step(a)
        memory.extend((state["obs"][i], int(a[i]), float(r[i]), nxt[i], bool(d[i])) for i in range(8))
        state["obs"] = nxt
        batch = [memory[i] for i in rng.randint(0, len(memory), 64)]
        s = torch.from_numpy(np.stack([b[0] for b in batch]))
        act = torch.tensor([b[1] for b in batch])
        rew = torch.tensor([b[2] for b in batch])
        s2 = torch.from_numpy(np.stack([b[3] for b in batch]))
        done = torch.tensor([b[4] for b in batch], dtype=torch.float32)
        q = online(s).gather(1, act.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            expected = rew + 0.99 * target(s2).max(1).values * (1 - done)
        loss = F.smooth_l1_loss(q, expected)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if state["step"] % 4 == 0:  # the script copies every 10 updates; the probe takes 8 steps
            target.load_state_dict(online.state_dict())
        return loss.detach()

    model = nn.ModuleDict({"policy_net": policy_net, "target_net": target_net})
    obs = torch.from_numpy(GoalCorridor(n=16, seed=3).reset())
    return {"model": model, "batch": obs, "step_fn": step_fn, "optimizer": optimizer}


# -------------------------------------------------------------------------------------- closure


def lstm_sine_lbfgs() -> Contract:
    torch.manual_seed(0)
    data = torch.from_numpy(sine_mod.sine_waves())
    seq = sine_mod.Sequence().double()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)

    def step_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = F.mse_loss(m(batch[0]), batch[1])
            loss.backward()
            return loss

        return optimizer.step(closure).detach()

    return {"model": seq, "batch": (data[3:, :-1], data[3:, 1:]), "step_fn": step_fn, "optimizer": optimizer}


def logreg_lbfgs(
    make_closure: Callable[..., Callable[[], torch.Tensor]] = logreg_mod.make_closure,
) -> Contract:
    torch.manual_seed(0)
    x, labels = clusters(2048, logreg_mod.DIM, classes=2, spread=6.0, seed=1)
    x = (x - x.mean(0)) / x.std(0)
    model = nn.Linear(logreg_mod.DIM, 1)
    optimizer = optim.LBFGS(model.parameters(), lr=1, max_iter=5, line_search_fn="strong_wolfe")

    def step_fn(m: nn.Linear, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return optimizer.step(make_closure(optimizer, m, batch[0], batch[1], 1e-3)).detach()

    return {"model": model, "batch": (x, labels.float()), "step_fn": step_fn, "optimizer": optimizer}


def style_transfer() -> Contract:
    """The trained tensor is the image: held as a parameter of a small wrapper module beside the frozen CNN."""
    torch.manual_seed(0)

    class Canvas(nn.Module):
        def __init__(self, image: torch.Tensor) -> None:
            super().__init__()
            self.image = nn.Parameter(image.clone())
            self.cnn = style_mod.FeatureNet().eval().requires_grad_(False)

        def forward(self) -> list[torch.Tensor]:
            return self.cnn(self.image)

    content = torch.cat([smooth_images(1, 32, seed=s) for s in (1, 2, 3)], dim=1)
    stripes = (torch.sin(torch.arange(32).float() * 1.3) > 0).float()
    style = torch.stack([stripes[None, :].expand(32, 32), stripes[:, None].expand(32, 32), content[0, 0]])[
        None
    ]
    canvas = Canvas(content)
    with torch.no_grad():
        content_target = canvas.cnn(content)[2]
        style_targets = [style_mod.gram_matrix(f) for f in canvas.cnn(style)[:2]]
    optimizer = optim.Adam(canvas.parameters(), lr=0.03)

    def step_fn(m: nn.Module, _unused: torch.Tensor) -> dict[str, torch.Tensor]:
        optimizer.zero_grad()
        features = m()
        c = 1e3 * F.mse_loss(features[2], content_target)
        s = (
            1e6
            * torch.stack(
                [
                    F.mse_loss(style_mod.gram_matrix(f), t)
                    for f, t in zip(features[:2], style_targets, strict=True)
                ]
            ).sum()
        )
        (c + s).backward()
        optimizer.step()
        with torch.no_grad():
            m.image.clamp_(0, 1)
        return {"content": c.detach(), "style": s.detach()}

    return {"model": canvas, "batch": content, "step_fn": step_fn, "optimizer": optimizer}


# ------------------------------------------------------------------------- sequence / by hand


def lstm_language_model() -> Contract:
    torch.manual_seed(0)
    data = batchify(markov_text(4000, lm_mod.VOCAB, seed=1), 20)
    model = lm_mod.RNNModel(lm_mod.VOCAB, lm_mod.EMSIZE, lm_mod.NHID, lm_mod.NLAYERS)
    state = {"hidden": model.init_hidden(20)}

    def step_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        hidden = tuple(h.detach() for h in state["hidden"])
        m.zero_grad()
        output, state["hidden"] = m(batch[0], hidden)
        loss = F.cross_entropy(output, batch[1])
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 0.25)
        for p in m.parameters():
            p.data.add_(p.grad, alpha=-20.0)
        return loss.detach()

    batches = [(data[i : i + 20], data[i + 1 : i + 21].reshape(-1)) for i in (0, 20, 40)]
    return {"model": model, "batches": batches, "step_fn": step_fn}


def tied_lm() -> Contract:
    torch.manual_seed(0)
    model = tied_mod.TiedGRULM()
    optimizer = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / 10, 0.5 * (1 + math.cos(math.pi * s / 60)))
    )
    stream = markov_text(4000, tied_mod.VOCAB, seed=1)

    def step_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(m(batch[0]).reshape(-1, tied_mod.VOCAB), batch[1].reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        return loss.detach()

    batches = [tied_mod.windows(stream, 32, torch.Generator().manual_seed(s)) for s in (1, 2, 3)]
    return {"model": model, "batches": batches, "step_fn": step_fn, "optimizer": optimizer}


def gcn() -> Contract:
    torch.manual_seed(0)
    adj, features, labels = community_graph(seed=1)
    adj_mat = normalized_adjacency(adj)
    idx_train = torch.cat([torch.nonzero(labels == c).view(-1)[:20] for c in range(3)])
    model = gcn_mod.GCN(features.size(1), 16, 3)
    optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def loss_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.nll_loss(m(batch[0], adj_mat)[idx_train], batch[1][idx_train])

    return {"model": model, "batch": (features, labels), "loss_fn": loss_fn, "optimizer": optimizer}


# ------------------------------------------------------------------- teachers, targets, several terms


def distillation(freeze_teacher: Callable[[nn.Module], None] = distill_mod.freeze_teacher) -> Contract:
    torch.manual_seed(0)
    x, y = template_images(4096, noise=0.3, seed=1)
    teacher, student = distill_mod.Teacher(), distill_mod.Student()
    distill_mod.train_teacher(teacher, x, y)
    freeze_teacher(teacher)
    optimizer = optim.Adam(student.parameters(), lr=3e-3)

    def step_fn(model: nn.ModuleDict, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            teacher_logits = model["teacher"](batch[0])
        optimizer.zero_grad()
        loss = distill_mod.distillation_loss(model["student"](batch[0]), teacher_logits, batch[1], 4.0, 0.7)
        loss.backward()
        optimizer.step()
        return loss.detach()

    model = nn.ModuleDict({"student": student, "teacher": teacher})
    batches = [(x[i * 64 : (i + 1) * 64], y[i * 64 : (i + 1) * 64]) for i in range(3)]
    return {"model": model, "batches": batches, "step_fn": step_fn, "optimizer": optimizer}


def byol(
    make_target: Callable[[nn.Module], nn.Module] = byol_mod.make_target,
    target_projection: Callable[..., torch.Tensor] = byol_mod.target_projection,
) -> Contract:
    torch.manual_seed(0)
    learner = byol_mod.BYOL(make_target)
    optimizer = optim.Adam(learner.parameters(), lr=1e-3)

    def step_fn(m: byol_mod.BYOL, x: torch.Tensor) -> torch.Tensor:
        v1, v2 = byol_mod.augment(x), byol_mod.augment(x)
        optimizer.zero_grad()
        loss = byol_mod.byol_loss(m.online(v1), target_projection(m, v2))
        loss = loss + byol_mod.byol_loss(m.online(v2), target_projection(m, v1))
        loss.backward()
        optimizer.step()
        m.update_target()
        return loss.detach()

    batches = [clusters(128, byol_mod.DIM, classes=8, spread=3.0, seed=s)[0] for s in (1, 2, 3)]
    return {"model": learner, "batches": batches, "step_fn": step_fn, "optimizer": optimizer}


def mean_teacher(update_ema_variables: Callable[..., None] = mt_mod.update_ema_variables) -> Contract:
    torch.manual_seed(0)
    import copy

    model = mt_mod.create_model()
    ema_model = copy.deepcopy(model).requires_grad_(False)
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    state = {"step": 0}

    def step_fn(both: nn.ModuleDict, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        state["step"] += 1
        x, y = batch
        student_out = both["model"](mt_mod.noisy(x))
        with torch.no_grad():
            teacher_out = both["ema_model"](mt_mod.noisy(x))
        class_loss = F.cross_entropy(student_out[:32], y[:32])
        consistency = (
            10.0
            * min(1.0, state["step"] / 20)
            * F.mse_loss(F.softmax(student_out, 1), F.softmax(teacher_out, 1))
        )
        optimizer.zero_grad()
        (class_loss + consistency).backward()
        optimizer.step()
        update_ema_variables(both["model"], both["ema_model"], 0.99, state["step"])
        return {"class": class_loss.detach(), "consistency": consistency.detach()}

    x, y = template_images(4096, seed=1)
    both = nn.ModuleDict({"model": model, "ema_model": ema_model})
    batches = [(x[i * 96 : (i + 1) * 96], y[i * 96 : (i + 1) * 96]) for i in range(3)]
    return {"model": both, "batches": batches, "step_fn": step_fn, "optimizer": optimizer}


def fast_neural_style() -> Contract:
    torch.manual_seed(0)
    loss_net = style_mod.FeatureNet().eval().requires_grad_(False)
    images = fns_mod.rgb_images(24, seed=1)
    stripes = (torch.sin(torch.arange(32).float() * 1.3) > 0).float()
    style_img = torch.stack([stripes[None, :].expand(32, 32), stripes[:, None].expand(32, 32), images[0, 0]])[
        None
    ]
    with torch.no_grad():
        grams = [style_mod.gram_matrix(f) for f in loss_net(style_img)[:2]]
    transformer = fns_mod.TransformerNet()
    optimizer = optim.Adam(transformer.parameters(), lr=1e-3)

    def step_fn(model: nn.ModuleDict, x: torch.Tensor) -> dict[str, torch.Tensor]:
        optimizer.zero_grad()
        features = model["loss_net"](model["transformer"](x))
        with torch.no_grad():
            target = model["loss_net"](x)[2]
        content = 1e3 * F.mse_loss(features[2], target)
        style = (
            1e6
            * torch.stack(
                [
                    F.mse_loss(style_mod.gram_matrix(f), g.expand(x.size(0), -1, -1))
                    for f, g in zip(features[:2], grams, strict=True)
                ]
            ).sum()
        )
        (content + style).backward()
        optimizer.step()
        return {"content": content.detach(), "style": style.detach()}

    model = nn.ModuleDict({"transformer": transformer, "loss_net": loss_net})
    return {
        "model": model,
        "batches": [images[i * 8 : (i + 1) * 8] for i in range(3)],
        "step_fn": step_fn,
        "optimizer": optimizer,
    }


def multitask_uncertainty() -> Contract:
    torch.manual_seed(0)
    x, y_reg, y_cls = mtu_mod.make_data(192, seed=1)
    model = mtu_mod.MultiTaskNet()
    optimizer = optim.Adam(model.parameters(), lr=3e-3)

    def loss_fn(m: mtu_mod.MultiTaskNet, batch: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
        reg, logits = m(batch[0])
        s = m.log_vars
        return {
            "regression": torch.exp(-s[0]) * F.mse_loss(reg, batch[1]) + s[0],
            "classification": torch.exp(-s[1]) * F.cross_entropy(logits, batch[2]) + s[1],
        }

    batches = [
        (x[i * 64 : (i + 1) * 64], y_reg[i * 64 : (i + 1) * 64], y_cls[i * 64 : (i + 1) * 64])
        for i in range(3)
    ]
    return {"model": model, "batches": batches, "loss_fn": loss_fn, "optimizer": optimizer}


def sparse_embedding_sparseadam(
    make_optimizers: Callable[..., list[optim.Optimizer]] = sparse_mod.make_optimizers,
) -> Contract:
    torch.manual_seed(0)
    model = sparse_mod.TextClassifier()
    optimizers = make_optimizers(model, 1e-2)

    def step_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        for opt in optimizers:
            opt.zero_grad()
        loss = F.cross_entropy(m(batch[0]), batch[1])
        loss.backward()
        for opt in optimizers:
            opt.step()
        return loss.detach()

    x, y = sparse_mod.documents(192, seed=1)
    batches = [(x[i * 64 : (i + 1) * 64], y[i * 64 : (i + 1) * 64]) for i in range(3)]
    return {"model": model, "batches": batches, "step_fn": step_fn}


HEALTHY = [
    dcgan, wgan_gp, vae, vae_kl_warmup, reinforce, actor_critic, ppo, dqn, lstm_sine_lbfgs, logreg_lbfgs,
    style_transfer, lstm_language_model, tied_lm, gcn, distillation, byol, mean_teacher, fast_neural_style,
    multitask_uncertainty, sparse_embedding_sparseadam,
]  # fmt: skip
