"""What the probe measures besides gradients: model inputs, module inputs, ReLU and tanh/sigmoid outputs,
and the gradient each named loss term sends into shared parameters. A mixin of `Recorder`. Torch only.
"""

import math

import torch

try:
    from . import _ts_probe_tensors as tens
except ImportError:  # the runner's own folder (user's interpreter)
    import _ts_probe_tensors as tens  # type: ignore[no-redef]

RELU_TYPES = ("ReLU", "ReLU6")
SAT_TYPES = {"Tanh": "tanh", "Sigmoid": "sigmoid"}
SKIP_INPUT_WORDS = ("mask", "label", "target")


class MeasureMixin:
    """Input, activation and loss-term statistics; expects the `Recorder` attributes it touches."""

    # set by Recorder.__init__
    params: list
    inputs: list
    module_input_rms: dict
    act: dict
    paused: bool
    shared_params: int
    term_grad_norms: dict
    out_rms: dict
    step: int

    def _module_input(self, name, args):
        t = next(iter(tens.float_tensors(args)), None)
        if t is None or t.numel() == 0 or t.is_complex():
            return
        with torch.no_grad():
            x = tens.stored_values(t.detach()).float()  # a sparse input: its stored values, zeros counted
            if bool(torch.isfinite(x).all()):
                self.module_input_rms[name] = round(math.sqrt(float(x.pow(2).sum()) / t.numel()), 6)

    def _input_stats(self, args, kwargs):
        slots = [(f"arg{i}", a) for i, a in enumerate(args)]
        slots += [(k, v) for k, v in kwargs.items() if not any(w in k.lower() for w in SKIP_INPUT_WORDS)]
        with torch.no_grad():
            for slot, obj in slots:
                for j, t in enumerate(tens.float_tensors(obj)):
                    if t.numel() == 0 or t.is_complex():
                        continue
                    x = tens.stored_values(t.detach()).float()
                    fin = torch.isfinite(x)
                    if not bool(fin.all()):
                        x = x[fin]
                    if x.numel() == 0:
                        continue
                    # a sparse input (a graph's adjacency) counts its absent entries as zeros
                    n = t.numel() if t.layout != torch.strided else x.numel()
                    mean = float(x.sum()) / n
                    rms = math.sqrt(float(x.pow(2).sum()) / n)
                    var = float(((x - mean) ** 2).sum()) + (n - x.numel()) * mean * mean
                    name = slot if j == 0 else f"{slot}[{j}]"
                    self.inputs.append(
                        {
                            "name": name,
                            "shape": list(t.shape),
                            "dtype": str(t.dtype).replace("torch.", ""),
                            "mean": round(mean, 6),
                            "std": round(math.sqrt(max(0.0, var) / (n - 1)), 6) if n > 1 else 0.0,
                            "rms": round(rms, 6),
                            "absmax": round(float(x.abs().max()), 6),
                        }
                    )
                    if len(self.inputs) >= 16:
                        return

    def _output_scale(self, name, output):
        """The root-mean-square of a module's (first floating-point) output, per measured step."""
        out = next(iter(tens.float_tensors(output)), None)
        if out is None or out.numel() == 0 or out.is_complex():
            return
        with torch.no_grad():
            rms = float(out.detach().float().pow(2).mean().sqrt())
        seen = self.out_rms.setdefault(name, [])
        if len(seen) < 2 or seen[-1][0] != self.step:
            seen.append((self.step, round(rms, 6) if math.isfinite(rms) else str(rms)))
            if len(seen) > 2:
                del seen[1]  # keep the first and the latest

    def _activation(self, name, tname, output):
        out = output if isinstance(output, torch.Tensor) else next(iter(tens.float_tensors(output)), None)
        if out is None or out.numel() == 0:
            return
        with torch.no_grad():
            y = out.detach()
            st = self.act.get(name)
            if tname in RELU_TYPES:
                unit_dim = 1 if y.dim() in (4, 5) else y.dim() - 1
                units = y.shape[unit_dim] if y.dim() > 0 else 1
                if y.dim() > 1:  # one reduction over every dim but the units', no copy
                    pos = y.amax(dim=[d for d in range(y.dim()) if d != unit_dim]) > 0
                else:
                    pos = (y > 0) if y.dim() > 0 else (y > 0).reshape(1)
                obs = y.numel() // max(1, units)
                if st is None or st.get("units") != units:
                    st = {"kind": "relu", "units": units, "ever": pos.clone(), "obs": 0}
                    self.act[name] = st
                else:
                    st["ever"] |= pos
                st["obs"] += obs
            else:
                kind = SAT_TYPES[tname]
                yf = y.float()
                flat = (yf.abs() > 0.99) if kind == "tanh" else ((yf < 0.01) | (yf > 0.99))
                if st is None:
                    st = {"kind": kind, "sat": 0.0, "n": 0}
                    self.act[name] = st
                st["sat"] += float(flat.sum())
                st["n"] += y.numel()

    def term_gradients(self, terms):
        """Gradient norm each named loss term sends into the parameters it shares with other terms."""
        trainable = [(n, p) for n, p in self.params if p.requires_grad]
        if len(terms) < 2 or not trainable:
            return
        self.paused = True
        try:
            per_term = {}  # type: dict
            for name, term in terms.items():
                if not isinstance(term, torch.Tensor) or not term.requires_grad:
                    per_term[name] = [None] * len(trainable)
                    continue
                grads = torch.autograd.grad(
                    term, [p for _, p in trainable], retain_graph=True, allow_unused=True
                )
                per_term[name] = [None if g is None else g.detach() for g in grads]
            shared = [
                j
                for j in range(len(trainable))
                if sum(
                    1
                    for g in per_term.values()
                    if g[j] is not None and bool(tens.stored_values(g[j]).ne(0).any())
                )
                >= 2
            ]
            self.shared_params = len(shared)
            if not shared:
                return
            for name, term_grads in per_term.items():
                sq = 0.0
                for j in shared:
                    g = term_grads[j]
                    if g is not None:
                        sq += float(torch.linalg.vector_norm(tens.stored_values(g).float())) ** 2
                self.term_grad_norms[name] = math.sqrt(sq)
        finally:
            self.paused = False
