"""The workload corpus: every healthy training script and its broken twins, with what each must show.

Each entry is a plain training script run as `python tests/workloads/<script> [--steps N]`. Healthy
ones must learn (their `checks` say which printed metric moves which way, and by how much, over the
default number of steps); broken ones run to the end without an error and carry the finding a gradient
observer should raise: its code (from findings.md, or a PROPOSED new code where none fits) and the
module(s) it concerns, named as the script names them (an attribute path inside the model, or the
variable that holds a separate network such as `netD`, `policy_net`, `ema_model`, `teacher`).

Scripts print `step N name=value ...` after every optimizer step and `eval N name=value ...` for
held-out measurements (N = steps done; 0 before training).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Regimes (what kind of training a rule must expect): a workload can be in several.
REGIMES = (
    "supervised",  # one loss that should go down, first-order optimizer
    "adversarial",  # two networks, two optimizers, losses that oscillate by design
    "kl",  # a KL term (VAE), possibly weighted or annealed
    "diffusion",  # noise-prediction loss at random timesteps
    "contrastive",  # InfoNCE / NT-Xent / triplet / pair losses
    "rl",  # returns, advantages, sampled actions: losses that rise and fall with the policy
    "closure",  # optimizer.step(closure): LBFGS evaluates the loss several times a step
    "ema_target",  # a copy updated without gradient (EMA teacher, DQN target network)
    "frozen_teacher",  # a frozen network used under no_grad (distillation, perceptual loss)
    "input_optimization",  # the trained tensor is an input, not a module parameter
    "sparse",  # sparse gradients (nn.Embedding(sparse=True), EmbeddingBag)
    "multitask",  # several weighted losses, learnable weights
    "weight_tied",  # one parameter used in two places
    "manual_update",  # parameters updated by hand (p.data.add_), no optimizer object
    "sequence",  # recurrent models, truncated BPTT, clipping
    "graph",  # message passing over a (sparse) adjacency
    "local_losses",  # several optimizers over disjoint modules, each with its own loss
)


@dataclass(frozen=True)
class Check:
    """`metric` (from `eval` lines, or the mean of the first/last quarter of `step` lines) must move in
    `direction` by at least `min_change` (absolute) between the start and the end of the run."""

    metric: str
    direction: Literal["down", "up"]
    min_change: float
    source: Literal["eval", "step"] = "eval"


@dataclass(frozen=True)
class Workload:
    name: str
    family: str
    regimes: tuple[str, ...]
    source: str  # the public example or paper it follows (details and licenses in SOURCES.md)
    checks: tuple[Check, ...] = ()  # healthy only: how it shows that it learns
    twin_of: str | None = None  # broken only: the healthy workload it breaks
    code: str | None = None  # broken only: the finding it should raise
    code_proposed: bool = False  # True when `code` is not in findings.md yet (a proposal)
    modules: tuple[str, ...] = ()  # broken only: the module(s) the finding should name; () = whole model
    symptom_gap: float | None = None  # broken only: its final metric trails the twin's by at least this
    default_steps: int = 60
    observe_from: int = 1  # the first optimizer iteration of the phase an observer should watch
    notes: str = ""

    @property
    def healthy(self) -> bool:
        return self.twin_of is None

    @property
    def script(self) -> str:
        return f"tests/workloads/{'' if self.healthy else 'broken/'}{self.name}.py"

    @property
    def command(self) -> list[str]:
        return ["python", self.script]


def _healthy(
    name: str, family: str, regimes: tuple[str, ...], source: str, *checks: Check, **kw: object
) -> Workload:
    return Workload(name, family, regimes, source, checks=checks, **kw)  # type: ignore[arg-type]


HEALTHY: tuple[Workload, ...] = (
    _healthy("dcgan", "GAN", ("adversarial",), "pytorch/examples dcgan", Check("swd", "down", 0.05)),
    _healthy(
        "wgan_gp",
        "GAN",
        ("adversarial",),
        "Gulrajani et al. 2017",
        Check("swd", "down", 0.15),
        default_steps=40,
    ),
    _healthy("vae", "VAE", ("kl",), "pytorch/examples vae", Check("test_loss", "down", 5.0)),
    _healthy("beta_vae", "VAE", ("kl",), "Higgins et al. 2017", Check("test_loss", "down", 10.0)),
    _healthy("vae_kl_warmup", "VAE", ("kl",), "Bowman et al. 2016", Check("test_elbo", "down", 8.0)),
    _healthy("ddpm", "diffusion", ("diffusion",), "Ho et al. 2020", Check("test_loss", "down", 0.1)),
    _healthy("simclr", "contrastive", ("contrastive",), "Chen et al. 2020", Check("test_loss", "down", 0.5)),
    _healthy("clip_infonce", "contrastive", ("contrastive",), "open_clip", Check("retrieval_acc", "up", 0.5)),
    _healthy(
        "reinforce",
        "RL",
        ("rl",),
        "pytorch/examples reinforce",
        Check("eval_return", "up", 0.5),
        default_steps=40,
    ),
    _healthy(
        "actor_critic",
        "RL",
        ("rl",),
        "pytorch/examples actor_critic",
        Check("eval_return", "up", 0.5),
        default_steps=40,
    ),
    _healthy("ppo", "RL", ("rl",), "CleanRL ppo.py", Check("eval_return", "up", 5.0), default_steps=30),
    _healthy(
        "dqn",
        "RL",
        ("rl", "ema_target"),
        "PyTorch DQN tutorial, CleanRL dqn.py",
        Check("eval_return", "up", 0.5),
        default_steps=150,
    ),
    _healthy(
        "lstm_sine_lbfgs",
        "LSTM regression",
        ("closure", "sequence"),
        "pytorch/examples time_sequence_prediction",
        Check("test_loss", "down", 0.3),
        default_steps=4,
    ),
    _healthy(
        "logreg_lbfgs",
        "linear model",
        ("closure", "supervised"),
        "L-BFGS logistic regression",
        Check("test_acc", "up", 0.2),
        default_steps=8,
    ),
    _healthy(
        "polynomial_regression",
        "linear model",
        ("supervised",),
        "pytorch/examples regression",
        Check("test_loss", "down", 5.0),
    ),
    _healthy(
        "lstm_language_model",
        "RNN language model",
        ("sequence", "manual_update"),
        "pytorch/examples word_language_model",
        Check("val_loss", "down", 0.8),
    ),
    _healthy(
        "tied_lm",
        "RNN language model",
        ("sequence", "weight_tied"),
        "word_language_model --tied, Press & Wolf 2017",
        Check("val_loss", "down", 0.5),
    ),
    _healthy(
        "gcn", "graph network", ("graph", "supervised"), "pytorch/examples gcn", Check("val_acc", "up", 0.3)
    ),
    _healthy(
        "style_transfer",
        "style transfer",
        ("input_optimization", "frozen_teacher"),
        "PyTorch neural style tutorial",
        Check("loss", "down", 0.5, source="step"),
    ),
    _healthy(
        "fast_neural_style",
        "style transfer",
        ("frozen_teacher", "supervised"),
        "pytorch/examples fast_neural_style",
        Check("test_loss", "down", 1.0),
        default_steps=40,
    ),
    _healthy(
        "super_resolution",
        "super-resolution",
        ("supervised",),
        "pytorch/examples super_resolution",
        Check("psnr", "up", 5.0),
    ),
    _healthy(
        "siamese",
        "metric learning",
        ("contrastive",),
        "pytorch/examples siamese_network",
        Check("pair_acc", "up", 0.1),
    ),
    _healthy(
        "triplet",
        "metric learning",
        ("contrastive",),
        "FaceNet triplet loss",
        Check("test_loss", "down", 0.3),
    ),
    _healthy(
        "distillation",
        "distillation",
        ("frozen_teacher", "supervised"),
        "PyTorch knowledge distillation tutorial",
        Check("student_acc", "up", 0.25),
        observe_from=151,
        notes="two phases, as in the tutorial: the teacher's own training takes optimizer iterations 1-150",
    ),
    _healthy(
        "multitask_uncertainty",
        "multi-task",
        ("multitask",),
        "Kendall et al. 2018",
        Check("test_mse", "down", 2.0),
        Check("test_acc", "up", 0.2),
    ),
    _healthy(
        "sparse_embedding_sparseadam",
        "sparse embedding",
        ("sparse", "supervised"),
        "torch SparseAdam docs",
        Check("test_acc", "up", 0.4),
    ),
    _healthy(
        "sparse_embedding_sgd",
        "sparse embedding",
        ("sparse", "contrastive"),
        "word2vec skip-gram",
        Check("test_loss", "down", 1.0),
    ),
    _healthy(
        "wide_and_deep",
        "recommender",
        ("supervised",),
        "Cheng et al. 2016",
        Check("test_logloss", "down", 0.06),
    ),
    _healthy(
        "rmsprop_mlp", "MLP classifier", ("supervised",), "Keras mnist_mlp", Check("test_acc", "up", 0.25)
    ),
    _healthy(
        "sgd_nesterov_onecycle",
        "CNN classifier",
        ("supervised",),
        "OneCycleLR docs, Smith & Topin 2018",
        Check("test_acc", "up", 0.4),
    ),
    _healthy(
        "mnist_adadelta",
        "CNN classifier",
        ("supervised",),
        "pytorch/examples mnist",
        Check("test_acc", "up", 0.2),
    ),
    _healthy(
        "byol",
        "self-supervised",
        ("contrastive", "ema_target"),
        "byol-pytorch",
        Check("loss", "down", 0.5, source="step"),
    ),
    _healthy(
        "mean_teacher",
        "semi-supervised",
        ("ema_target", "supervised"),
        "Tarvainen & Valpola 2017",
        Check("teacher_acc", "up", 0.1),
    ),
    _healthy(
        "tied_autoencoder",
        "auto-encoder",
        ("weight_tied", "supervised"),
        "Vincent et al. 2010",
        Check("test_loss", "down", 0.05),
    ),
)


BROKEN: tuple[Workload, ...] = (
    Workload(
        "dcgan_d_never_steps",
        "GAN",
        ("adversarial",),
        "pytorch/examples dcgan",
        twin_of="dcgan",
        code="params_not_updated",
        modules=("netD",),
        symptom_gap=0.05,
    ),
    Workload(
        "wgan_gp_d_optimizer_over_g",
        "GAN",
        ("adversarial",),
        "Gulrajani et al. 2017",
        twin_of="wgan_gp",
        code="params_not_updated",
        modules=("netD",),
        symptom_gap=0.15,
        default_steps=40,
    ),
    Workload(
        "dqn_target_is_online",
        "RL",
        ("rl", "ema_target"),
        "PyTorch DQN tutorial",
        twin_of="dqn",
        code="target_network_shared",
        code_proposed=True,
        modules=("policy_net",),
        symptom_gap=0.5,
        default_steps=150,
    ),
    Workload(
        "vae_kl_wrong_sign",
        "VAE",
        ("kl",),
        "pytorch/examples vae",
        twin_of="vae",
        code="loss_term_wrong_sign",
        code_proposed=True,
        modules=("fc21", "fc22"),
        symptom_gap=100.0,
    ),
    Workload(
        "actor_critic_advantage_not_detached",
        "RL",
        ("rl",),
        "pytorch/examples actor_critic",
        twin_of="actor_critic",
        code="advantage_not_detached",
        code_proposed=True,
        modules=("value_head",),
        default_steps=40,
        notes="silent at this length: the return still rises",
    ),
    Workload(
        "logreg_lbfgs_closure_no_zero_grad",
        "linear model",
        ("closure",),
        "L-BFGS logistic regression",
        twin_of="logreg_lbfgs",
        code="grad_not_zeroed",
        default_steps=8,
        notes="silent here: the strong-Wolfe line search still finds a good minimum",
    ),
    Workload(
        "sparse_embedding_not_in_optimizer",
        "sparse embedding",
        ("sparse",),
        "torch SparseAdam docs",
        twin_of="sparse_embedding_sparseadam",
        code="params_not_updated",
        modules=("embedding",),
        symptom_gap=0.05,
    ),
    Workload(
        "byol_target_trained_by_gradient",
        "self-supervised",
        ("ema_target",),
        "byol-pytorch",
        twin_of="byol",
        code="target_receives_gradient",
        code_proposed=True,
        modules=("target_encoder", "target_projector"),
        notes="silent at this length",
    ),
    Workload(
        "mean_teacher_ema_never_updated",
        "semi-supervised",
        ("ema_target",),
        "Tarvainen & Valpola 2017",
        twin_of="mean_teacher",
        code="target_not_updated",
        code_proposed=True,
        modules=("ema_model",),
        symptom_gap=0.1,
    ),
    Workload(
        "distillation_teacher_train_mode",
        "distillation",
        ("frozen_teacher",),
        "PyTorch KD tutorial",
        twin_of="distillation",
        code="teacher_in_train_mode",
        code_proposed=True,
        modules=("teacher",),
        observe_from=151,
        notes="silent at this length: the noisy soft targets still teach the student",
    ),
)

WORKLOADS: tuple[Workload, ...] = HEALTHY + BROKEN
BY_NAME: dict[str, Workload] = {w.name: w for w in WORKLOADS}
