"""Write the training logs of the fault benchmark (`cases/logs/`), deterministically (seeded noise).

    python -m benchmarks.faults.gen_logs

Each log imitates one framework's real output format. The step constants below are the labels the
manifest uses; change both together. Standard library only (plus tensorboard for the event-file case).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "cases" / "logs"

# Labels (log's own step units); manifest.yaml repeats them.
SPIKE_GRAD_STEP, SPIKE_LOSS_STEP = 3000, 3030  # jsonl_spike_gradnorm_leads (interval 10)
NANOGPT_DIVERGE = 1800  # nanogpt_divergence (interval 10)
MEGATRON_SCALE_FALL = 2010  # megatron_loss_scale_collapse (interval 10)
DS_FIRST_OVERFLOW = 1470  # deepspeed_overflow_min_scale (every step)
THROUGHPUT_JSONL_DROP = 2400  # jsonl_throughput_drop (interval 20)
MEGATRON_SLOW_STEP = 6000  # megatron_slowdown (interval 10)
TB_NAN_STEP = 1230  # tb_nonfinite (interval 10)
MLFLOW_DIVERGE = 7000  # mlflow_divergence (interval 50)
MEGA_SPIKE_GRAD, MEGA_SPIKE_LOSS = 3400, 3405  # megatron_spike_rank_prefixed (every iteration)
KERAS_OVERFIT_EPOCH = 12  # keras_overfitting (per epoch)
LIGHTNING_OVERFIT_EPOCH = 8  # lightning_overfitting (per epoch, 100 steps per epoch)


def _noise(rng: random.Random, rel: float) -> float:
    return 1.0 + rel * rng.gauss(0.0, 1.0)


def _decay(step: int, start: float, floor: float, tau: float) -> float:
    return floor + (start - floor) * math.exp(-step / tau)


def jsonl_spike_gradnorm_leads(rng: random.Random) -> str:
    lines = []
    for step in range(0, 5001, 10):
        loss = _decay(step, 8.0, 2.0, 800) * _noise(rng, 0.01)
        gn = 0.45 * _noise(rng, 0.08)
        if SPIKE_GRAD_STEP <= step <= SPIKE_GRAD_STEP + 20:
            gn *= 25.0
        if SPIKE_LOSS_STEP <= step < SPIKE_LOSS_STEP + 120:
            loss *= 1.0 + 1.5 * math.exp(-(step - SPIKE_LOSS_STEP) / 30)
        lr = 3e-4 * min(1.0, (step + 1) / 500)
        rec = {"step": step, "train": {"loss": round(loss, 4), "grad_norm": round(gn, 4)}, "lr": lr}
        lines.append(json.dumps(rec))
    return "\n".join(lines) + "\n"


def hf_trainer_nan(rng: random.Random) -> str:
    out = [
        "***** Running training *****",
        "  Num examples = 20,000",
        "  Num Epochs = 3",
        "  Total optimization steps = 1,875",
    ]
    for i in range(1, 120):
        step = i * 10
        epoch = step / 625
        if i < 62:
            loss = _decay(step, 2.8, 0.9, 300) * _noise(rng, 0.03)
            gn = 1.1 * _noise(rng, 0.15) * (1 + 4 * (i > 55) * (i - 55))
            out.append(
                f"{{'loss': {loss:.4f}, 'grad_norm': {gn:.6f}, 'learning_rate': {5e-5 * (1 - step / 1875):.10g}, 'epoch': {epoch:.2f}}}"
            )
        else:
            out.append(
                f"{{'loss': nan, 'grad_norm': nan, 'learning_rate': {5e-5 * (1 - step / 1875):.10g}, 'epoch': {epoch:.2f}}}"
            )
        if i % 20 == 0:
            out.append(
                f" {int(100 * step / 1875)}%|{'█' * (step * 10 // 1875)}          | {step}/1875 [02:{i % 60:02d}<05:00,  6.2it/s]"
            )
    out.append(
        "{'train_runtime': 301.2, 'train_samples_per_second': 199.2, 'train_steps_per_second': 6.2, 'train_loss': nan, 'epoch': 3.0}"
    )
    return "\n".join(out) + "\n"


def nanogpt_divergence(rng: random.Random) -> str:
    out = [
        "tokens per iteration will be: 491,520",
        "found vocab_size = 50304 (inside data/openwebtext/meta.pkl)",
        "Initializing a new model from scratch",
        "number of parameters: 123.59M",
    ]
    for it in range(0, 3001, 10):
        if it % 500 == 0:
            base = _decay(it, 10.9, 3.4, 250)
            if it > NANOGPT_DIVERGE:
                base += 0.0028 * (it - NANOGPT_DIVERGE)
            out.append(
                f"step {it}: train loss {base * _noise(rng, 0.004):.4f}, val loss {base * 1.01 * _noise(rng, 0.004):.4f}"
            )
            if it > 0:
                out.append("saving checkpoint to out")
        loss = _decay(it, 10.9, 3.4, 250) * _noise(rng, 0.015)
        if it > NANOGPT_DIVERGE:
            loss += 0.0028 * (it - NANOGPT_DIVERGE) * _noise(rng, 0.05)
        ms = 412.0 * _noise(rng, 0.02)
        out.append(f"iter {it}: loss {loss:.4f}, time {ms:.2f}ms, mfu {31.2 * _noise(rng, 0.01):.2f}%")
    return "\n".join(out) + "\n"


def _megatron_line(
    it: int,
    total: int,
    ms: float,
    lr: float,
    loss: float,
    scale: float,
    gn: float,
    skipped: int,
    nan: int,
    tflops: float | None = None,
) -> str:
    extra = f" throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |" if tflops is not None else ""
    return (
        f" iteration {it:>8}/{total:>8} | consumed samples: {it * 512:>12} | elapsed time per iteration (ms): {ms:.1f} |"
        f"{extra} learning rate: {lr:.6E} | global batch size: {512:>5} | lm loss: {loss:.6E} | loss scale: {scale:.1f} |"
        f" grad norm: {gn:.3f} | number of skipped iterations: {skipped:>3} | number of nan iterations: {nan:>3} |"
    )


def megatron_loss_scale_collapse(rng: random.Random) -> str:
    out = ["> building GPT model ...", "> learning rate decay style: cosine"]
    scale = 65536.0
    for it in range(10, 2401, 10):
        loss = _decay(it, 9.0, 3.1, 400) * _noise(rng, 0.01)
        gn = 0.9 * _noise(rng, 0.1)
        skipped = 0
        if it >= MEGATRON_SCALE_FALL:
            n_fall = (it - MEGATRON_SCALE_FALL) // 10 + 1
            scale = max(1.0, 65536.0 / 2 ** min(n_fall * 2, 16))
            skipped = 2 if scale > 1.0 else 10
            loss *= 1.0 + 0.01 * n_fall
            gn = 1.0 if skipped == 10 else gn * 3
        out.append(
            _megatron_line(it, 100000, 1510.0 * _noise(rng, 0.01), 1.5e-4, loss, scale, gn, skipped, 0)
        )
    return "\n".join(out) + "\n"


def deepspeed_overflow_min_scale(rng: random.Random) -> str:
    out = []
    ts = "2024-05-01 10:{:02d}:{:02d},{:03d}"
    scale = 2.0**14
    for t, step in enumerate(range(1400, 1531), start=1):
        stamp = ts.format((t // 60) % 60, t % 60, (t * 37) % 1000)
        if step >= DS_FIRST_OVERFLOW:
            if scale <= 1:
                out.append(
                    f"[default0]:[{stamp}] [INFO] [loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."
                )
                out.append("[default0]:Traceback (most recent call last):")
                out.append('[default0]:  File "pretrain.py", line 412, in <module>')
                out.append("[default0]:    engine.step()")
                out.append(
                    "[default0]:Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."
                )
                break
            out.append(
                f"[default0]:[{stamp}] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {int(scale)}, reducing to {int(scale) // 2}"
            )
            scale /= 2
        skipped = max(0, step - DS_FIRST_OVERFLOW + 1)
        if step % 10 == 0:
            out.append(
                f"[default0]:[{stamp}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped={skipped}, lr=[0.0001], mom=[(0.9, 0.95)]"
            )
            loss = 3.2 * _noise(rng, 0.01) * (1 + 0.02 * skipped)
            out.append(
                f"[default0]:steps: {step} loss: {loss:.4f} iter time (s): {0.51 * _noise(rng, 0.02):.3f} samples/sec: {251.0 * _noise(rng, 0.02):.3f}"
            )
    return "\n".join(out) + "\n"


def fairseq_plateau(rng: random.Random) -> str:
    out = [
        "2021-03-01 12:00:00 | INFO | fairseq_cli.train | task: TranslationTask",
        "2021-03-01 12:00:01 | INFO | fairseq_cli.train | num. shared model params: 44,508,160",
    ]
    for upd in range(100, 6001, 100):
        loss = 9.966 + 0.02 * rng.gauss(0, 1)
        lr = 5e-4 * min(1.0, upd / 4000)
        out.append(
            f"2021-03-01 12:{(upd // 100) % 60:02d}:00 | INFO | train_inner | epoch {upd // 1500 + 1:03d}:  {upd % 1500:>5} / 1500 loss={loss:.3f}, nll_loss={loss:.3f}, ppl={2**loss:.1f}, wps={12000 * _noise(rng, 0.03):.0f}, ups=3.2, wpb=3800, bsz=128, num_updates={upd}, lr={lr:.6g}, gnorm={0.35 * _noise(rng, 0.1):.3f}, train_wall=31, gb_free=10.1, wall={upd * 0.31:.0f}"
        )
    return "\n".join(out) + "\n"


def lightning_constant_kl(rng: random.Random) -> str:
    rows = ["epoch,step,train_loss,recon_loss,kl_loss,val_loss"]
    for epoch in range(20):
        for s in range(49, 500, 50):
            step = epoch * 500 + s
            recon = _decay(step, 180.0, 95.0, 2500) * _noise(rng, 0.02)
            rows.append(f"{epoch},{step},{recon:.4f},{recon:.4f},0.0,")
        val = _decay(epoch * 500 + 499, 180.0, 96.0, 2500) * _noise(rng, 0.005)
        rows.append(f"{epoch},{epoch * 500 + 499},,,,{val:.4f}")
    return "\n".join(rows) + "\n"


def trainer_state_frozen_loss(rng: random.Random) -> str:
    history = []
    for step in range(10, 1001, 10):
        history.append(
            {
                "epoch": round(step / 400, 4),
                "grad_norm": 0.0,
                "learning_rate": 2e-5 * (1 - step / 1000),
                "loss": 2.3026,
                "step": step,
            }
        )
        if step % 200 == 0:
            history.append(
                {
                    "epoch": round(step / 400, 4),
                    "eval_loss": 2.302585,
                    "eval_accuracy": 0.1,
                    "eval_runtime": 3.1,
                    "eval_samples_per_second": 322.5,
                    "step": step,
                }
            )
    state = {
        "best_metric": None,
        "epoch": 2.5,
        "global_step": 1000,
        "is_hyper_param_search": False,
        "log_history": history,
        "logging_steps": 10,
        "max_steps": 1000,
        "num_train_epochs": 3,
        "train_batch_size": 32,
    }
    return json.dumps(state, indent=2) + "\n"


def tqdm_oscillation(rng: random.Random) -> str:
    out = []
    for epoch in range(1, 7):
        frames = []
        for it in range(10, 501, 10):
            k = epoch * 50 + it // 10
            loss = (0.95 if k % 2 == 0 else 1.65) * _noise(rng, 0.04)
            acc = 0.62 if k % 2 == 0 else 0.41
            pct = it * 100 // 500
            bar = "█" * (pct // 10) + " " * (10 - pct // 10)
            frames.append(
                f"Epoch {epoch}: {pct:3d}%|{bar}| {it}/500 [00:{it // 15:02d}<00:{(500 - it) // 15:02d}, 15.02it/s, loss={loss:.3f}, acc={acc:.3f}]"
            )
        out.append("\r".join(frames))
    return "\n".join(out) + "\n"


def keras_overfitting(rng: random.Random) -> str:
    rows = ["epoch,accuracy,loss,val_accuracy,val_loss"]
    for e in range(60):
        loss = _decay(e, 1.3, 0.03, 12) * _noise(rng, 0.02)
        acc = min(0.999, 1 - loss / 1.5)
        val = (
            0.55
            + 0.9 * (math.exp(-e / 3) if e < KERAS_OVERFIT_EPOCH else 0.0)
            + (0.018 * (e - KERAS_OVERFIT_EPOCH) if e >= KERAS_OVERFIT_EPOCH else 0.0)
        )
        val *= _noise(rng, 0.01)
        rows.append(
            f"{e},{acc:.4f},{loss:.4f},{max(0.0, 0.86 - 0.004 * max(0, e - KERAS_OVERFIT_EPOCH)):.4f},{val:.4f}"
        )
    return "\n".join(rows) + "\n"


def lightning_overfitting(rng: random.Random) -> str:
    rows = ["epoch,step,train_loss,val_loss,val_acc"]
    for epoch in range(30):
        for s in range(49, 100, 50):
            step = epoch * 100 + s
            rows.append(f"{epoch},{step},{_decay(step, 2.2, 0.02, 700) * _noise(rng, 0.03):.4f},,")
        step = epoch * 100 + 99
        e = epoch
        val = (
            0.62
            + 1.4 * math.exp(-e / 2.5)
            + (0.05 * (e - LIGHTNING_OVERFIT_EPOCH) if e > LIGHTNING_OVERFIT_EPOCH else 0.0)
        )
        rows.append(
            f"{epoch},{step},,{val * _noise(rng, 0.01):.4f},{0.8 - 0.004 * max(0, e - LIGHTNING_OVERFIT_EPOCH):.4f}"
        )
    return "\n".join(rows) + "\n"


def jsonl_throughput_drop(rng: random.Random) -> str:
    out = []
    for step in range(0, 4001, 20):
        tps = (52000.0 if step < THROUGHPUT_JSONL_DROP else 31000.0) * _noise(rng, 0.015)
        rec = {
            "step": step,
            "loss": round(_decay(step, 7.0, 2.6, 900) * _noise(rng, 0.01), 4),
            "perf": {"tokens_per_sec": round(tps, 1), "step_time_ms": round(1000 * 65536 / tps, 1)},
        }
        out.append(json.dumps(rec))
    return "\n".join(out) + "\n"


def megatron_slowdown(rng: random.Random) -> str:
    out = []
    for it in range(5000, 7001, 10):
        slow = it >= MEGATRON_SLOW_STEP
        ms = (1390.0 if slow else 810.0) * _noise(rng, 0.01)
        tflops = (112.0 if slow else 192.0) * _noise(rng, 0.01)
        loss = 2.9 - 0.00005 * (it - 5000)
        out.append(
            _megatron_line(
                it,
                100000,
                ms,
                1.2e-4,
                loss * _noise(rng, 0.008),
                131072.0,
                0.6 * _noise(rng, 0.08),
                0,
                0,
                tflops,
            )
        )
    return "\n".join(out) + "\n"


def oom_traceback(rng: random.Random) -> str:
    out = ["Loading dataset shards: 100%|██████████| 4/4", "Model has 1.3B parameters"]
    for step in range(10, 1201, 10):
        out.append(
            f"step {step} | loss {_decay(step, 6.5, 2.4, 300) * _noise(rng, 0.01):.4f} | lr {2e-4:.2e} | tok/s {11800 * _noise(rng, 0.02):.0f}"
        )
    out += [
        "Traceback (most recent call last):",
        '  File "/home/user/proj/train.py", line 188, in <module>',
        "    main()",
        '  File "/home/user/proj/train.py", line 161, in main',
        "    loss.backward()",
        '  File "/opt/conda/lib/python3.11/site-packages/torch/_tensor.py", line 626, in backward',
        "    torch.autograd.backward(",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.21 GiB is free. Of the allocated memory 74.02 GiB is allocated by PyTorch, and 2.33 GiB is reserved by PyTorch but unallocated.",
    ]
    return "\n".join(out) + "\n"


def nccl_timeout(rng: random.Random) -> str:
    out = []
    for step in range(4200, 4243):
        if step % 2 == 0:
            out.append(
                f"[rank0]: step {step} loss {2.01 * _noise(rng, 0.01):.4f} lr 1.00e-04 grad_norm {0.41 * _noise(rng, 0.05):.3f}"
            )
    out += [
        "[rank3]:[E1101 12:31:07.412345 2211 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=84871, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.",
        "[rank3]:[E1101 12:31:07.413000 2211 ProcessGroupNCCL.cpp:1785] [PG 0 (default_pg) Rank 3] Exception (either an error or timeout) detected by watchdog at work: 84871, last enqueued NCCL work: 84872, last completed NCCL work: 84870.",
        "[rank3]:[E1101 12:31:07.500000 2211 ProcessGroupNCCL.cpp:630] [Rank 3] To avoid data inconsistency, we are taking the entire process down.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "W1101 12:31:09.000000 140 torch/distributed/elastic/multiprocessing/api.py:890] Sending process 2208 closing signal SIGTERM",
        "E1101 12:31:10.000000 140 torch/distributed/elastic/multiprocessing/api.py:862] failed (exitcode: -6) local_rank: 3 (pid: 2211) of binary: /usr/bin/python",
    ]
    return "\n".join(out) + "\n"


def kv_oscillation(rng: random.Random) -> str:
    out = []
    for step in range(50, 4001, 50):
        k = step // 50
        loss = 1.5 + (0.45 if k % 2 else -0.45) * _noise(rng, 0.1)
        out.append(
            f"step={step} loss={loss:.4f} lr=0.0030 grad_norm={2.5 * _noise(rng, 0.2):.3f} epoch={step // 1000}"
        )
    return "\n".join(out) + "\n"


def jsonl_plateau_chance(rng: random.Random) -> str:
    out = []
    for step in range(0, 3001, 20):
        out.append(
            json.dumps(
                {
                    "epoch": step // 500,
                    "step": step,
                    "loss": round(2.3026 + 0.01 * rng.gauss(0, 1), 4),
                    "acc": round(0.1 + 0.01 * rng.gauss(0, 1), 4),
                    "lr": 0.1,
                }
            )
        )
    return "\n".join(out) + "\n"


def megatron_spike_rank_prefixed(rng: random.Random) -> str:
    out = []
    for it in range(3000, 3601):
        loss = (2.45 - 0.0002 * (it - 3000)) * _noise(rng, 0.01)
        gn = 0.35 * _noise(rng, 0.08)
        if MEGA_SPIKE_GRAD <= it <= MEGA_SPIKE_GRAD + 3:
            gn *= 30.0
        if MEGA_SPIKE_LOSS <= it < MEGA_SPIKE_LOSS + 40:
            loss *= 1.0 + 1.2 * math.exp(-(it - MEGA_SPIKE_LOSS) / 8)
        line = _megatron_line(it, 150000, 2010.0 * _noise(rng, 0.01), 6e-5, loss, 4096.0, gn, 0, 0)
        for rank in (0, 1):
            out.append(
                f"[default{rank}]:" + line
                if rank == 0
                else f"[default{rank}]: [Rank 1] (after {it} iterations) memory (MB) | allocated: 21034.1 | max allocated: 36620.7"
            )
    return "\n".join(out) + "\n"


def mlflow_divergence(rng: random.Random, root: Path) -> None:
    run = root / "mlflow_divergence"
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    (run / "params").mkdir(exist_ok=True)
    (run / "meta.yaml").write_text(
        "artifact_uri: file:///mlruns/3/9f1c2e/artifacts\nend_time: 1714570000000\nexperiment_id: '3'\nlifecycle_stage: active\nrun_id: 9f1c2e\nrun_name: resnet50-lr0.4\nstart_time: 1714500000000\nstatus: 3\n",
        encoding="utf-8",
    )
    (run / "params" / "lr").write_text("0.4", encoding="utf-8")
    loss_lines, val_lines = [], []
    t0 = 1714500000000
    for step in range(0, 12001, 50):
        loss = _decay(step, 6.9, 1.4, 1500) * _noise(rng, 0.015)
        if step > MLFLOW_DIVERGE:
            loss += 0.0009 * (step - MLFLOW_DIVERGE)
        loss_lines.append(f"{t0 + step * 800} {loss:.6f} {step}")
        if step % 1000 == 0:
            val_lines.append(f"{t0 + step * 800} {loss * 1.05:.6f} {step}")
    (run / "metrics" / "loss").write_text("\n".join(loss_lines) + "\n", encoding="utf-8")
    (run / "metrics" / "val_loss").write_text("\n".join(val_lines) + "\n", encoding="utf-8")


def tb_nonfinite(rng: random.Random, root: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    logdir = root / "tb_nonfinite"
    for old in logdir.glob("events.*"):
        old.unlink()
    writer = SummaryWriter(str(logdir), filename_suffix=".bench")
    for step in range(0, 2001, 10):
        loss = _decay(step, 4.0, 1.1, 400) * _noise(rng, 0.01)
        gn = 0.8 * _noise(rng, 0.1)
        if step >= TB_NAN_STEP:
            loss = math.inf if step == TB_NAN_STEP else math.nan
            gn = math.nan
        writer.add_scalar("train/loss", loss, step, walltime=1714500000 + step)
        writer.add_scalar("train/grad_norm", gn, step, walltime=1714500000 + step)
        writer.add_scalar("train/lr", 1e-3, step, walltime=1714500000 + step)
    writer.close()
    # a stable file name (the writer puts the host name and the current time in it)
    for written in logdir.glob("events.*"):
        written.rename(logdir / "events.out.tfevents.1714500000.trainhost.4242.0")


# ---------------------------------------------------------------------------- healthy logs


def healthy_nanogpt_warmup_eval(rng: random.Random) -> str:
    out = [
        "tokens per iteration will be: 491,520",
        "number of parameters: 123.59M",
        "compiling the model... (takes a ~minute)",
    ]
    for it in range(0, 5001, 10):
        base = 3.0 + 7.9 * math.exp(-it / 220) + 0.25 * math.exp(-it / 3000)
        if it % 500 == 0:
            out.append(
                f"step {it}: train loss {base * _noise(rng, 0.003):.4f}, val loss {base * 1.012 * _noise(rng, 0.003):.4f}"
            )
            if it > 0:
                out.append("saving checkpoint to out")
        ms = (2900.0 if it == 0 else 415.0) * _noise(rng, 0.02)
        out.append(
            f"iter {it}: loss {base * _noise(rng, 0.02):.4f}, time {ms:.2f}ms, mfu {(-100.0 if it < 50 else 31.0 * _noise(rng, 0.01)):.2f}%"
        )
    return "\n".join(out) + "\n"


def healthy_trainer_state(rng: random.Random) -> str:
    history = []
    for step in range(25, 3001, 25):
        loss = (0.35 + 1.9 * math.exp(-step / 500)) * _noise(rng, 0.06)
        gn = 2.0 * math.exp(-step / 2000) * _noise(rng, 0.2) + 0.4
        history.append(
            {
                "epoch": round(step / 1000, 4),
                "grad_norm": round(gn, 4),
                "learning_rate": 3e-5 * min(1.0, step / 300) * (1 - step / 3000 + 1e-3),
                "loss": round(loss, 4),
                "step": step,
            }
        )
        if step % 500 == 0:
            history.append(
                {
                    "epoch": round(step / 1000, 4),
                    "eval_loss": round((0.42 + 1.8 * math.exp(-step / 500)) * _noise(rng, 0.01), 4),
                    "eval_accuracy": round(0.9 - 0.5 * math.exp(-step / 500), 4),
                    "eval_runtime": 12.4,
                    "eval_samples_per_second": 403.2,
                    "eval_steps_per_second": 12.6,
                    "step": step,
                }
            )
    state = {
        "best_metric": None,
        "epoch": 3.0,
        "global_step": 3000,
        "is_hyper_param_search": False,
        "log_history": history,
        "logging_steps": 25,
        "max_steps": 3000,
        "num_train_epochs": 3,
        "train_batch_size": 32,
    }
    return json.dumps(state, indent=2) + "\n"


def healthy_megatron_fp16(rng: random.Random) -> str:
    out = []
    scale = 4096.0
    for it in range(10, 5001, 10):
        skipped = 0
        if it % 1000 == 0:
            scale *= 2.0  # loss-scale window passed without overflow
        if it in (1510, 3730):
            scale /= 2.0  # one ordinary overflow
            skipped = 1
        lr = 1.5e-4 * min(1.0, it / 500) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * it / 5000)))
        loss = (2.8 + 6.2 * math.exp(-it / 450)) * _noise(rng, 0.012)
        out.append(
            _megatron_line(
                it,
                5000,
                1505.0 * _noise(rng, 0.015),
                lr,
                loss,
                scale,
                (1.2 * math.exp(-it / 1500) + 0.3) * _noise(rng, 0.12),
                skipped,
                0,
            )
        )
    return "\n".join(out) + "\n"


def healthy_lightning(rng: random.Random) -> str:
    rows = ["epoch,step,train_loss,train_acc,val_loss,val_acc"]
    for epoch in range(25):
        for s in range(49, 400, 50):
            step = epoch * 400 + s
            loss = (0.25 + 2.0 * math.exp(-step / 1500)) * _noise(rng, 0.05)
            rows.append(f"{epoch},{step},{loss:.4f},{min(0.99, 1 - loss / 2.6):.4f},,")
        val = (0.31 + 1.95 * math.exp(-(epoch * 400 + 399) / 1500)) * _noise(rng, 0.008)
        rows.append(f"{epoch},{epoch * 400 + 399},,,{val:.4f},{min(0.97, 1 - val / 2.6):.4f}")
    return "\n".join(rows) + "\n"


def healthy_rl_ppo(rng: random.Random) -> str:
    out = []
    for it in range(1, 401):
        progress = 1 - math.exp(-it / 120)
        rec = {
            "iteration": it,
            "timesteps": it * 2048,
            "episode_reward_mean": round(-200 + 450 * progress + 40 * rng.gauss(0, 1), 2),
            "policy_loss": round(-0.01 + 0.02 * rng.gauss(0, 1), 5),
            "value_loss": round((30 * math.exp(-it / 150) + 4) * _noise(rng, 0.25), 4),
            "entropy": round(1.4 - 0.6 * progress + 0.02 * rng.gauss(0, 1), 4),
            "approx_kl": round(abs(0.01 + 0.004 * rng.gauss(0, 1)), 5),
            "clip_fraction": round(abs(0.12 + 0.03 * rng.gauss(0, 1)), 4),
            "fps": round(3100 * _noise(rng, 0.03)),
        }
        out.append(json.dumps(rec))
    return "\n".join(out) + "\n"


def healthy_fairseq_lr_step(rng: random.Random) -> str:
    out = ["2021-03-01 12:00:00 | INFO | fairseq_cli.train | task: TranslationTask"]
    for upd in range(100, 10001, 100):
        lr = 5e-4 if upd < 6000 else 5e-5
        loss = 4.2 + 5.5 * math.exp(-upd / 900) - (0.35 if upd >= 6000 else 0.0)
        loss *= _noise(rng, 0.01)
        out.append(
            f"2021-03-01 13:{(upd // 100) % 60:02d}:00 | INFO | train_inner | epoch {upd // 2000 + 1:03d}:  {upd % 2000:>5} / 2000 loss={loss:.3f}, nll_loss={loss - 0.2:.3f}, ppl={2 ** (loss - 0.2):.2f}, wps={12500 * _noise(rng, 0.03):.0f}, ups=3.3, wpb=3800, bsz=128, num_updates={upd}, lr={lr:.6g}, gnorm={0.6 * _noise(rng, 0.1):.3f}, train_wall=30, gb_free=10.1, wall={upd * 0.3:.0f}"
        )
        if upd % 2000 == 0:
            out.append(
                f"2021-03-01 13:{(upd // 100) % 60:02d}:30 | INFO | valid | epoch {upd // 2000:03d} | valid on 'valid' subset | loss {loss * 1.03:.3f} | nll_loss {loss * 1.03 - 0.2:.3f} | ppl {2 ** (loss * 1.03 - 0.2):.2f} | wps 41000 | wpb 3700 | bsz 120 | num_updates {upd}"
            )
    return "\n".join(out) + "\n"


def healthy_tqdm(rng: random.Random) -> str:
    out = []
    for epoch in range(1, 9):
        frames = []
        for it in range(10, 301, 10):
            step = (epoch - 1) * 300 + it
            loss = (0.18 + 1.1 * math.exp(-step / 600)) * _noise(rng, 0.05)
            pct = it * 100 // 300
            bar = "█" * (pct // 10) + " " * (10 - pct // 10)
            frames.append(
                f"Epoch {epoch}/8: {pct:3d}%|{bar}| {it}/300 [00:{it // 20:02d}<00:{(300 - it) // 20:02d}, 20.1it/s, loss={loss:.4f}, lr=1.0e-03]"
            )
        out.append("\r".join(frames))
    return "\n".join(out) + "\n"


TEXT_LOGS = {
    "jsonl_spike_gradnorm_leads.jsonl": jsonl_spike_gradnorm_leads,
    "hf_trainer_nan.log": hf_trainer_nan,
    "nanogpt_divergence.txt": nanogpt_divergence,
    "megatron_loss_scale_collapse.log": megatron_loss_scale_collapse,
    "deepspeed_overflow_min_scale.log": deepspeed_overflow_min_scale,
    "fairseq_plateau.log": fairseq_plateau,
    "lightning_constant_kl.csv": lightning_constant_kl,
    "trainer_state_frozen_loss/trainer_state.json": trainer_state_frozen_loss,
    "tqdm_oscillation.log": tqdm_oscillation,
    "keras_overfitting.csv": keras_overfitting,
    "lightning_overfitting.csv": lightning_overfitting,
    "jsonl_throughput_drop.jsonl": jsonl_throughput_drop,
    "megatron_slowdown.log": megatron_slowdown,
    "oom_traceback.log": oom_traceback,
    "nccl_timeout.log": nccl_timeout,
    "kv_oscillation.log": kv_oscillation,
    "jsonl_plateau_chance.jsonl": jsonl_plateau_chance,
    "megatron_spike_rank_prefixed.log": megatron_spike_rank_prefixed,
    "healthy_nanogpt_warmup_eval.txt": healthy_nanogpt_warmup_eval,
    "healthy_trainer_state/trainer_state.json": healthy_trainer_state,
    "healthy_megatron_fp16.log": healthy_megatron_fp16,
    "healthy_lightning.csv": healthy_lightning,
    "healthy_rl_ppo.jsonl": healthy_rl_ppo,
    "healthy_fairseq_lr_step.log": healthy_fairseq_lr_step,
    "healthy_tqdm.log": healthy_tqdm,
}


def write_text_logs(out: Path = OUT) -> list[Path]:
    """Write every text log under `out` (deterministic: the same bytes on every run)."""
    written = []
    for i, (name, fn) in enumerate(sorted(TEXT_LOGS.items())):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fn(random.Random(1000 + i)), encoding="utf-8", newline="")
        written.append(path)
    mlflow_divergence(random.Random(7), out)
    written += sorted((out / "mlflow_divergence").rglob("*"))
    return [p for p in written if p.is_file()]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write_text_logs(OUT)
    tb_nonfinite(random.Random(8), OUT)
    print(f"wrote {len(TEXT_LOGS) + 2} logs under {OUT}")


if __name__ == "__main__":
    main()
