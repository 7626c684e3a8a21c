"""PNG of per-layer gradient norms (matplotlib imported lazily, Agg backend, never a window)."""

from __future__ import annotations

import io
from collections.abc import Sequence


def short_labels(names: Sequence[str], width: int = 28) -> list[str]:
    """Tick labels that stay distinct: drop the dotted prefix all names share, then shorten what is
    still too long to its layer indices and last two names."""
    parts = [n.split(".") for n in names]
    shared = 0
    if len(parts) > 1:
        while all(len(p) > shared + 1 for p in parts) and len({p[shared] for p in parts}) == 1:
            shared += 1
    prefix = "…" if shared else ""
    out = []
    for p in parts:
        comps = p[shared:]
        text = prefix + ".".join(comps)
        if len(text) > width:  # keep layer indices and the last two names, e.g. "…3.query_key_value.weight"
            kept = [c for i, c in enumerate(comps) if c.isdigit() or i >= len(comps) - 2]
            text = "…" + ".".join(kept)
        if len(text) > width:
            text = "…" + text[-(width - 1) :]
        out.append(text)
    return out


def grad_norm_png(
    layers: Sequence[tuple[str, float]], *, title: str = "Gradient RMS per layer"
) -> bytes | None:
    """Bar chart (log scale) of gradient RMS per layer in forward order; layers whose weights got no
    gradient are marked with a red x at the bottom. None when there is nothing to plot."""
    rows = [(n or "(model)", float(v or 0.0)) for n, v in layers]
    if not any(v > 0 for _, v in rows):
        return None
    try:
        import matplotlib
    except ImportError:
        from trainsleuth.tools.extras import MissingExtra

        raise MissingExtra("the gradient plot", "plots") from None

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    rows = rows[:80]
    fig = Figure(figsize=(max(5.0, 0.25 * len(rows) + 2), 4.0), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    values = [v for _, v in rows]
    ax.bar(range(len(rows)), [v if v > 0 else float("nan") for v in values], color="#3b6ea5")
    ax.set_yscale("log")
    positive = [v for v in values if v > 0]
    floor = (min(positive) if positive else 1e-12) / 10
    dead = [i for i, v in enumerate(values) if v <= 0]
    if dead:
        ax.scatter(dead, [floor] * len(dead), marker="x", color="#c0392b", label="no gradient", zorder=3)
        ax.legend(loc="upper left", fontsize=7)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(short_labels([n for n, _ in rows]), rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("gradient RMS")
    ax.set_title(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", pad_inches=0.1)  # long labels are never clipped
    return buf.getvalue()
