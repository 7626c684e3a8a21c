"""The regime the probe recognises, from what it observes, on small real models beside the corpus.

The loss graph (`_ts_probe_graph`): a Gaussian KL's sign in the forms people write, policy-gradient terms
with and without a detached advantage, and the look-alikes that must not count (a focal loss, uncertainty
weights, a distillation loss). The watch (`_ts_probe_watch`) through the entrypoint driver: EMA updates
written the ways libraries write them, a frozen reference that nothing updates, a momentum encoder
updated inside its forward, a frozen backbone in train mode that runs with gradients.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainsleuth.tools.runners import _ts_probe_core, _ts_probe_graph, _ts_probe_rules, probe_runner


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _names(*modules: nn.Module) -> dict[int, str]:
    return {id(p): f"{i}.{n}" for i, m in enumerate(modules) for n, p in m.named_parameters()}


# ---------------------------------------------------------------------------------------- loss graph


def _encoder() -> tuple[nn.Linear, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    enc = nn.Linear(4, 6)
    h = enc(torch.randn(16, 4))
    return enc, h[:, :3], h[:, 3:]


def test_a_gaussian_kl_is_read_with_its_sign_in_every_usual_form() -> None:
    enc, mu, logvar = _encoder()
    names = _names(enc)
    forms = {
        "pytorch/examples": -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()),
        "rearranged": 0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).sum(1).mean(),
        "torch.distributions": torch.distributions.kl_divergence(
            torch.distributions.Normal(mu, torch.exp(0.5 * logvar)),
            torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu)),
        ).sum(),
    }
    for name, kl in forms.items():
        added = _ts_probe_graph.inspect(kl + 1.0, names)["kl_terms"]
        subtracted = _ts_probe_graph.inspect(3.0 * F.relu(mu).sum() - kl, names)["kl_terms"]
        assert [t["sign"] for t in added] == [1], name
        assert [t["sign"] for t in subtracted] == [-1], name


def test_exp_minus_x_without_a_square_is_not_a_kl() -> None:
    enc, rate, _ = _encoder()
    counts = torch.rand(16, 3) + 0.5
    poisson_nll = (rate.exp() - counts * rate).sum()  # exp(x) - y x: a Poisson likelihood, no mu^2
    assert _ts_probe_graph.inspect(poisson_nll, _names(enc))["kl_terms"] == []


def _policy_and_critic() -> tuple[nn.Module, nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    actor, critic = nn.Linear(4, 3), nn.Linear(4, 1)
    obs = torch.randn(32, 4)
    dist = torch.distributions.Categorical(logits=actor(obs))
    action = dist.sample()
    return actor, critic, dist.log_prob(action), critic(obs).squeeze(1)


def test_a_policy_gradient_term_and_an_advantage_that_leaks_into_the_critic() -> None:
    actor, critic, logp, value = _policy_and_critic()
    returns = torch.randn(32)
    names = _names(actor, critic)
    healthy = _ts_probe_graph.inspect(-(logp * (returns - value.detach())).mean(), names)
    assert healthy["pg_terms"] == healthy["pg_constant"] == 1
    assert healthy["pg_weight_min"] < 0 < healthy["pg_weight_max"]
    leaking = _ts_probe_graph.inspect(-(logp * (returns - value)).mean(), names)
    assert leaking["pg_with_grad"] == 1
    assert leaking["pg_weight_only_params"] == ["1.bias", "1.weight"]  # the critic, not the actor


def test_look_alikes_of_a_policy_gradient_do_not_count() -> None:
    torch.manual_seed(0)
    net = nn.Linear(4, 3)
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    logp = F.log_softmax(net(x), 1).gather(1, y[:, None]).squeeze(1)
    names = _names(net)
    focal = -((1 - logp.exp()) ** 2 * logp).mean()  # the weight carries gradient, into the same layer
    focal_graph = _ts_probe_graph.inspect(focal, names)
    assert focal_graph["pg_weight_only_params"] == []
    log_var = nn.Parameter(torch.zeros(()))
    uncertainty = torch.exp(-log_var) * F.cross_entropy(net(x), y) + log_var  # a reduced loss, weighted
    assert _ts_probe_graph.inspect(uncertainty, {**names, id(log_var): "log_var"})["pg_terms"] == 0
    teacher = F.softmax(torch.randn(32, 3), 1)
    distill = -(teacher * F.log_softmax(net(x), 1)).sum(1).mean()  # soft targets: no selected action
    assert _ts_probe_graph.inspect(distill, names)["pg_terms"] == 0


# ------------------------------------------------------------------------------------- the watch


def _regimes_and_findings(contract: dict[str, Any], steps: int = 6) -> tuple[set[str], list[tuple[str, Any]]]:
    stats = probe_runner.drive(contract, steps, _ts_probe_core, torch)
    stats["regimes"] = _ts_probe_rules.regimes.detect(stats)
    findings = _ts_probe_rules.analyze(stats, [])
    assert stats["internal_errors"] == []
    return {r["name"] for r in stats["regimes"]}, [
        (f["code"], f["module"]) for f in findings if f["severity"] != "info"
    ]


def _student_and_copy(update: Any, *, dropout: float = 0.0, train_copy: bool = True) -> dict[str, Any]:
    torch.manual_seed(0)
    student = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 4))
    ema = copy.deepcopy(student).requires_grad_(False).train(train_copy)
    opt = torch.optim.Adam(student.parameters(), lr=1e-2)
    x, y = torch.randn(64, 8), torch.randint(0, 4, (64,))

    def step_fn(both: nn.ModuleDict, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        out = both["student"](batch[0])
        with torch.no_grad():
            target = F.softmax(both["ema"](batch[0]), 1)
        loss = F.cross_entropy(out, batch[1]) + F.mse_loss(F.softmax(out, 1), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        update(both["student"], both["ema"])
        return loss.detach()

    both = nn.ModuleDict({"student": student, "ema": ema})
    return {"model": both, "batches": [(x, y)], "step_fn": step_fn, "optimizer": opt}


def test_an_ema_written_with_foreach_lerp_is_a_target_that_follows() -> None:
    def lerp(student: nn.Module, ema: nn.Module) -> None:
        with torch.no_grad():
            torch._foreach_lerp_(list(ema.parameters()), list(student.parameters()), 0.01)

    regimes, findings = _regimes_and_findings(_student_and_copy(lerp, dropout=0.2))
    assert "ema_target" in regimes
    assert findings == []  # the EMA copy runs in train mode with dropout on purpose (mean teacher)


def test_an_ema_written_out_of_place_is_not_updated() -> None:
    def lost(student: nn.Module, ema: nn.Module) -> None:
        with torch.no_grad():
            for e, s in zip(ema.parameters(), student.parameters(), strict=True):
                torch.lerp(e, s, 0.01)  # the result is thrown away

    _, findings = _regimes_and_findings(_student_and_copy(lost))
    assert findings == [("target_not_updated", "ema")]


def test_a_frozen_reference_nothing_updates_is_not_a_broken_target() -> None:
    """A reference policy (RLHF's KL anchor) is a frozen copy on purpose: nothing reads it after the step."""
    regimes, findings = _regimes_and_findings(_student_and_copy(lambda s, e: None, train_copy=False))
    assert findings == []
    assert "frozen_teacher" in regimes


def test_a_momentum_encoder_updated_inside_its_forward_is_a_target() -> None:
    """MoCo updates its key encoder at the start of the forward, not after the step."""

    class MoCo(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8))
            self.key = copy.deepcopy(self.query).requires_grad_(False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                for k, q in zip(self.key.parameters(), self.query.parameters(), strict=True):
                    k.mul_(0.99).add_(q, alpha=0.01)
                keys = F.normalize(self.key(x + 0.1 * torch.randn_like(x)), dim=1)
            queries = F.normalize(self.query(x), dim=1)
            return F.cross_entropy(queries @ keys.T / 0.2, torch.arange(x.size(0)))

    torch.manual_seed(0)
    model = MoCo()
    opt = torch.optim.SGD(model.query.parameters(), lr=0.05, momentum=0.9)
    regimes, findings = _regimes_and_findings(
        {"model": model, "batches": [torch.randn(32, 8)], "optimizer": opt}
    )
    assert "ema_target" in regimes
    assert findings == []  # the key encoder's batch norm in train mode is MoCo's design


def test_a_frozen_teacher_left_in_train_mode_is_named() -> None:
    torch.manual_seed(0)
    teacher = nn.Sequential(
        nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 4)
    )
    teacher.requires_grad_(False)  # frozen, but .eval() forgotten
    student = nn.Linear(8, 4)
    opt = torch.optim.Adam(student.parameters(), lr=1e-2)

    def step_fn(both: nn.ModuleDict, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            soft = F.softmax(both["teacher"](x) / 2.0, 1)
        loss = F.kl_div(F.log_softmax(both["student"](x) / 2.0, 1), soft, reduction="batchmean")
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    both = nn.ModuleDict({"student": student, "teacher": teacher})
    regimes, findings = _regimes_and_findings(
        {"model": both, "batches": [torch.randn(64, 8)], "step_fn": step_fn, "optimizer": opt}
    )
    assert "frozen_teacher" in regimes
    assert ("teacher_in_train_mode", "teacher") in findings
    teacher.eval()
    _, findings = _regimes_and_findings({"model": both, "batches": [torch.randn(64, 8)], "step_fn": step_fn})
    assert findings == []


# ------------------------------------------------------------------- sparse gradients, every mode


class _Bag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(200, 16, sparse=True)
        self.fc = nn.Linear(16, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embedding(ids))


def test_a_sparse_gradient_is_a_gradient_in_live_mode(tmp_path: Any) -> None:
    import trainsleuth.probe
    from trainsleuth.tools.probe import read_probe_run

    torch.manual_seed(0)
    model = _Bag()
    sparse_opt = torch.optim.SparseAdam(list(model.embedding.parameters()), lr=1e-2)
    dense_opt = torch.optim.Adam(model.fc.parameters(), lr=1e-2)
    handle = trainsleuth.probe.attach(model, dense_opt, every=1, run_dir=tmp_path / "run")
    gen = torch.Generator().manual_seed(1)
    for _ in range(6):
        ids, y = torch.randint(0, 200, (32, 5), generator=gen), torch.randint(0, 3, (32,), generator=gen)
        loss = F.cross_entropy(model(ids), y)
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        handle.record_loss(loss)
    handle.close()
    report = read_probe_run(tmp_path / "run")
    assert not [f for f in report.findings if f.code == "no_gradient"], report.findings
    (row,) = [row for row in report.table if row["module"] == "embedding"]
    assert row["grad_norm"] > 0  # read through the sparse gradient's stored values


def test_a_sparse_gradient_is_a_gradient_in_the_entrypoint_probe() -> None:
    torch.manual_seed(0)
    model = _Bag()
    opts = [
        torch.optim.SparseAdam(list(model.embedding.parameters()), lr=1e-2),
        torch.optim.Adam(model.fc.parameters()),
    ]
    ids, y = torch.randint(0, 200, (32, 5)), torch.randint(0, 3, (32,))

    def step_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        for o in opts:
            o.zero_grad()
        loss = F.cross_entropy(m(batch[0]), batch[1])
        loss.backward()
        for o in opts:
            o.step()
        return loss.detach()

    stats = probe_runner.drive(
        {"model": model, "batches": [(ids, y)], "step_fn": step_fn}, 4, _ts_probe_core, torch
    )
    embedding = next(p for p in stats["params"] if p["name"] == "embedding.weight")
    assert all(isinstance(n, float) and n > 0 for n in embedding["grad_norms"])
    assert embedding["changed_steps"] and stats["internal_errors"] == []
    stats["regimes"] = _ts_probe_rules.regimes.detect(stats)
    assert "sparse" in {r["name"] for r in stats["regimes"]}
