"""What the loss's autograd graph says about the kind of training: read once, before a backward.

Two structures are looked for, by walking the graph from the loss (bounded, no tensor is changed):

- **policy-gradient terms**: a log-probability of a selected action (a log-softmax / log / logsumexp
  chain ending in a gather or index) multiplied by a weight (the return or advantage). A weight with
  no gradient is REINFORCE / actor-critic / PPO as written everywhere; a weight that carries gradient
  into parameters the log-probability does not use is an advantage that was not detached.
- **Gaussian KL terms**: `c * (exp(x) - x)` (the variance part of KL(N(mu, e^x) || N(0, 1))) or
  `c * (v - log v)`, with `mu^2` beside it, and the sign of `c` along the linear path from the loss:
  positive when the KL is added to the loss, negative when it is subtracted.

Torch only (the graph's node types and saved tensors); the statistics it returns are plain data.
"""

import torch

MAX_NODES = 20000
MAX_TERMS = 64
LOGPROB_DEPTH = 12

# nodes the coefficient of a term passes through unchanged
PASS = {
    "SumBackward0",
    "SumBackward1",
    "MeanBackward0",
    "MeanBackward1",
    "ViewBackward0",
    "ReshapeAliasBackward0",
    "UnsafeViewBackward0",
    "ExpandBackward0",
    "SqueezeBackward0",
    "SqueezeBackward1",
    "SqueezeBackward2",
    "UnsqueezeBackward0",
    "CloneBackward0",
    "ToCopyBackward0",
    "SliceBackward0",
    "SelectBackward0",
    "IndexBackward0",
    "CatBackward0",
    "StackBackward0",
    "TBackward0",
    "PermuteBackward0",
    "TransposeBackward0",
    "AliasBackward0",
}
# nodes between a log-probability and the loss term that uses it (selection, shape, sign, PPO's ratio)
LOGPROB_PATH = PASS | {
    "GatherBackward0",
    "NegBackward0",
    "SubBackward0",
    "AddBackward0",
    "ExpBackward0",
    "MulBackward1",
    "DivBackward1",
}
LOG_NODES = {"LogSoftmaxBackward0", "LogsumexpBackward0", "LogBackward0", "NllLossBackward0"}
SELECT_NODES = {"GatherBackward0", "IndexBackward0", "SelectBackward0", "NllLossBackward0"}


def _name(node):
    return type(node).__name__


def _children(node):
    return [n for n, _ in getattr(node, "next_functions", ()) if n is not None]


def _saved(node, attr):
    try:
        return getattr(node, attr)
    except Exception:
        return None


def _sign(value):
    """+1 / -1 when every element of a saved operand has that sign, 0 when mixed or unknown."""
    if value is None:
        return 0
    if isinstance(value, (int, float)):
        return 1 if value > 0 else (-1 if value < 0 else 0)
    if isinstance(value, torch.Tensor):
        try:
            with torch.no_grad():
                v = value.detach()
                if v.numel() == 0 or v.is_complex():
                    return 0
                lo, hi = float(v.min()), float(v.max())
        except Exception:
            return 0
        return 1 if lo > 0 else (-1 if hi < 0 else 0)
    return 0


def _linear_children(node, sign):
    """[(child, its coefficient sign)] through a node that is linear in each input, else None."""
    name = _name(node)
    nexts = list(getattr(node, "next_functions", ()))
    if name in PASS:
        return [(n, sign) for n, _ in nexts if n is not None]
    if name in ("AddBackward0", "AddBackward1"):
        alpha = _sign(_saved(node, "_saved_alpha")) or 1
        return [(n, sign if i == 0 else sign * alpha) for i, (n, _) in enumerate(nexts) if n is not None]
    if name in ("SubBackward0", "SubBackward1"):
        alpha = _sign(_saved(node, "_saved_alpha")) or 1
        return [(n, sign if i == 0 else -sign * alpha) for i, (n, _) in enumerate(nexts) if n is not None]
    if name in ("RsubBackward0", "RsubBackward1"):  # other - alpha * self
        return [(n, -sign if i == 0 else sign) for i, (n, _) in enumerate(nexts) if n is not None]
    if name == "NegBackward0":
        return [(n, -sign) for n, _ in nexts if n is not None]
    if name == "MulBackward0":
        s_other = _sign(_saved(node, "_saved_other"))
        s_self = _sign(_saved(node, "_saved_self"))
        out = []
        for i, (n, _) in enumerate(nexts):
            if n is not None:
                out.append((n, sign * (s_other if i == 0 else s_self)))
        return out
    if name in ("MulBackward1", "DivBackward1"):
        return [(n, sign * _sign(_saved(node, "_saved_other"))) for n, _ in nexts if n is not None]
    if name == "DivBackward0":
        return [
            (n, sign * _sign(_saved(node, "_saved_other")) if i == 0 else 0)
            for i, (n, _) in enumerate(nexts)
            if n is not None
        ]
    return None


def _params_below(nodes, names, limit=4000):
    """Names of the parameters (AccumulateGrad leaves known in `names`, id -> name) a subgraph reaches."""
    found = set()  # type: set
    seen = set()  # type: set
    queue = [n for n in nodes if n is not None]
    while queue and len(seen) < limit:
        node = queue.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if _name(node) == "AccumulateGrad":
            var = _saved(node, "variable")
            name = names.get(id(var)) if var is not None else None
            if name is not None:
                found.add(name)
            continue
        queue.extend(_children(node))
    return found


TRANSPARENT = ("TBackward0", "PermuteBackward0", "TransposeBackward0", "ViewBackward0", "ToCopyBackward0")


def _leaf_name(node, names):
    if _name(node) != "AccumulateGrad":
        return None
    var = _saved(node, "variable")
    return names.get(id(var)) if var is not None else None


def _nearest_params(node, names, depth=4):
    """The parameters closest below a node (a Linear's weight, behind its transpose, and bias)."""
    level = [node]
    for _ in range(depth):
        hits = set()
        nxt = []
        for n in level:
            for c in _children(n):
                hit = _leaf_name(c, names)
                if hit is not None:
                    hits.add(hit)
                elif _name(c) in TRANSPARENT:
                    below = [_leaf_name(g, names) for g in _children(c)]
                    hits |= {b for b in below if b is not None}
                    nxt.append(c)
                elif _name(c) != "AccumulateGrad":
                    nxt.append(c)
        if hits:
            return hits
        level = nxt[:32]
    return set()


def _is_logprob(node):
    """A log-probability of a selected entry: a selection node above a log node, within a few steps."""
    selected = False
    frontier = [node]
    for _ in range(LOGPROB_DEPTH):
        nxt = []
        for n in frontier:
            name = _name(n)
            if name in SELECT_NODES:
                selected = True
            if name == "NllLossBackward0" and _saved(n, "_saved_reduction") != 0:
                return (
                    False  # a mean/summed negative log-likelihood is a loss, not a log-probability per action
                )
            if name in LOG_NODES and selected:
                return True
            if name in LOGPROB_PATH or name in SELECT_NODES or name in LOG_NODES:
                nxt.extend(_children(n))
        frontier = nxt[:16]
        if not frontier:
            return False
    return False


def inspect(loss, names):
    """Read the loss's graph. `names` maps id(parameter) -> its name. Returns plain data."""
    root = getattr(loss, "grad_fn", None)
    out = {"nodes": 0, "truncated": False, "pg_terms": 0, "pg_constant": 0, "pg_with_grad": 0,
           "pg_weight_min": None, "pg_weight_max": None, "pg_weight_only_params": [],
           "pg_logprob_params": [], "kl_terms": []}  # type: dict  # fmt: skip
    if root is None:
        return out
    additive = {}  # type: dict  # id(node) -> signs it is reached with along linear paths
    exps, logs, squares = [], [], []  # type: list, list, list
    keep = {}  # type: dict
    seen = set()  # type: set
    queue = [(root, 1, True)]
    muls = []  # type: list
    while queue:
        if len(seen) >= MAX_NODES:
            out["truncated"] = True
            break
        node, sign, linear = queue.pop()
        key = (id(node), sign if linear else None, linear)
        if key in seen:
            continue
        seen.add(key)
        keep[id(node)] = node
        name = _name(node)
        if name == "MulBackward0" and len(muls) < 4 * MAX_TERMS:
            muls.append(node)
        if linear:
            additive.setdefault(id(node), set()).add(sign)
            if name == "ExpBackward0" and sign:
                exps.append((node, sign))
            elif name == "LogBackward0" and sign:
                logs.append((node, sign))
            elif name == "PowBackward0" and _saved(node, "_saved_exponent") == 2 and sign:
                squares.append((node, sign))
            kids = _linear_children(node, sign)
            if kids is not None:
                for child, s in kids:
                    queue.append((child, s, bool(s)))
                continue
        for child in _children(node):
            queue.append((child, 0, False))
    out["nodes"] = len(seen)
    _policy_terms(muls, names, out)
    _kl_terms(exps, logs, squares, additive, keep, names, out)
    return out


def _policy_terms(muls, names, out):
    weights = []
    only, logp = set(), set()
    analysed = 0
    for node in muls:
        nexts = list(getattr(node, "next_functions", ()))
        if len(nexts) != 2:
            continue
        for lp_i in (0, 1):
            lp_node, w_node = nexts[lp_i][0], nexts[1 - lp_i][0]
            if lp_node is None or not _is_logprob(lp_node):
                continue
            if w_node is not None and _is_logprob(w_node):
                continue  # p * log p (an entropy), not a weighted log-probability
            out["pg_terms"] += 1
            weight = _saved(node, "_saved_other" if lp_i == 0 else "_saved_self")
            if isinstance(weight, torch.Tensor) and weight.numel():
                with torch.no_grad():
                    weights.append((float(weight.min()), float(weight.max())))
            if w_node is None:
                out["pg_constant"] += 1
            else:
                out["pg_with_grad"] += 1
                if analysed < MAX_TERMS:
                    analysed += 1
                    lp_params = _params_below([lp_node], names)
                    logp |= lp_params
                    only |= _params_below([w_node], names) - lp_params
            break
        if out["pg_terms"] >= MAX_TERMS * 4:
            break
    if weights:
        out["pg_weight_min"] = min(w[0] for w in weights)
        out["pg_weight_max"] = max(w[1] for w in weights)
    out["pg_weight_only_params"] = sorted(only - logp)
    out["pg_logprob_params"] = sorted(logp)[:50]


def _kl_terms(exps, logs, squares, additive, keep, names, out):
    """c * (exp(x) - x) or c * (v - log v): the variance part of a Gaussian KL, with its sign."""
    sq_signs = {s for _, s in squares}
    seen = set()
    for node, sign, kind in [(n, s, "exp") for n, s in exps] + [(n, s, "log") for n, s in logs]:
        kids = _children(node)
        if not kids:
            continue
        x = kids[0]
        signs = additive.get(id(x), set())
        # exp(x) - x: x enters with the opposite sign; v - log v: v enters with the opposite sign of log v
        variance_sign = sign if kind == "exp" else -sign
        if -sign not in signs or id(x) in seen or variance_sign not in sq_signs:
            continue  # a Gaussian KL has mu^2 beside the variance part, with the same sign
        seen.add(id(x))
        squares_same = [n for n, s in squares if s == variance_sign]
        mu_params = set()
        for sq in squares_same[:4]:
            below = _children(sq)
            if below:
                mu_params |= _nearest_params(below[0], names)
        var_params = _nearest_params(x, names) if kind == "exp" else set()
        out["kl_terms"].append(
            {
                "form": "exp(x) - x" if kind == "exp" else "v - log(v)",
                "sign": variance_sign,
                "square_signs": sorted(sq_signs),
                "variance_params": sorted(var_params),
                "mean_params": sorted(mu_params),
            }
        )
        if len(out["kl_terms"]) >= 8:
            break
