"""The statistics record of a probe run (`Recorder.summary`): per parameter, per module, per step.

Standard library only: it reads the recorder's plain Python state.
"""

try:
    from ._ts_probe_util import _f
except ImportError:  # the runner's own folder (user's interpreter)
    from _ts_probe_util import _f  # type: ignore[no-redef]

MAX_PARAMS_REPORTED = 5000


def summary(self, *, mode="loss_fn", fixed_batch=True):
    """The statistics record `_ts_probe_rules.analyze` reads (`self` is a `Recorder`)."""
    valid = self.steps_done if self.nonfinite_step is None else self.nonfinite_index
    params = []
    pbm = {}  # type: dict
    for i, (name, p) in enumerate(self.params[:MAX_PARAMS_REPORTED]):
        s = self.pstats[i]
        owner = self.owner[i]
        params.append(
            {
                "name": name,
                "module": owner,
                "shape": list(p.shape),
                "numel": p.numel(),
                "ndim": p.dim(),
                "dtype": str(p.dtype).replace("torch.", ""),
                "requires_grad": bool(p.requires_grad),
                "grad_norms": [_f(x) if x is not None else None for x in s.grad_norms],
                "none_steps": s.none_steps,
                "zero_steps": s.zero_steps,
                "param_norms": [_f(x) for x in s.param_norms],
                "update_ratios": [_f(x) if x is not None else None for x in s.update_ratios],
                "changed_steps": s.changed_steps,
                "stale_steps": s.stale_steps,
                "init_rms": _f(s.init_rms) if s.init_rms is not None else None,
                "init_norm": _f(self.init_norms[i]),
                "group": self.opt_group.get(id(p)),
                "in_optimizer": (id(p) in self.opt_ids) if self.optimizers else None,
                "lr": _f(self._effective_lr(p)) if self.optimizers else None,
                "cleared_steps": s.cleared,
            }
        )
        if p.requires_grad:
            parts = name.split(".")
            for j in range(len(parts)):
                pbm.setdefault(".".join(parts[:j]), []).append(name)
    modules = []
    for name, tname in self.types.items():
        row = {
            "name": name,
            "type": tname,
            "calls": self.calls.get(name, 0),
            "order": self.first_order.get(name),
        }
        if name in self.module_input_rms:
            row["input_rms"] = self.module_input_rms[name]
        if name in self.out_rms:
            row["out_rms"] = [v for _, v in self.out_rms[name]]
        st = self.act.get(name)
        if st is not None:
            row["act"] = st["kind"]
            if st["kind"] == "relu":
                ever = st["ever"]
                row["units"] = st["units"]
                row["dead_fraction"] = round(1.0 - float(ever.float().mean()), 6)
                row["act_obs"] = st["obs"]
            else:
                row["saturated_fraction"] = round(st["sat"] / max(1, st["n"]), 6)
                row["act_n"] = st["n"]
        modules.append(row)
    return {
        "mode": mode,
        "fixed_batch": fixed_batch,
        "steps": self.steps_done,
        "valid_steps": valid,
        "nonfinite_step": self.nonfinite_step,
        "losses": [_f(x) if x is not None else None for x in self.losses],
        "loss_terms": {k: [_f(x) for x in v] for k, v in self.loss_terms.items()},
        "global_grad_norms": [_f(x) for x in self.global_grad_norms],
        "predicted_changes": [_f(x) if x is not None else None for x in self.predicted_changes],
        "micro_backwards": list(self.micro_backwards),
        "discarded_micro": list(self.discards),
        "step_lrs": list(self.step_lrs),
        "peak_lrs": self.peak_lrs(),
        "forward_origin": self.forward_origin,
        "loss_op": self.loss_op,
        "backward_origin": self.backward_origin,
        "model_output_finite": self.model_output_finite,
        "term_grad_norms": {k: _f(v) for k, v in self.term_grad_norms.items()},
        "shared_params": self.shared_params,
        "updates_measured": self.updates_measured,
        "measured_at": [i - self.index_offset for i in self.measured_at if i >= self.index_offset],
        "eval_during_training": self.eval_during_training,
        "inputs": self.inputs,
        "params": params,
        "params_by_module": pbm,
        "modules": modules,
        "internal_errors": self.internal_errors,
    }
