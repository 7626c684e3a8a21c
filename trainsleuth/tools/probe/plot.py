"""PNG of per-layer gradient norms (matplotlib imported lazily, Agg backend, never a window)."""

from __future__ import annotations

import io
from collections.abc import Sequence


def grad_norm_png(
    layers: Sequence[tuple[str, float]], *, title: str = "Gradient RMS per layer"
) -> bytes | None:
    """Bar chart (log scale) of gradient RMS per layer in forward order; layers whose weights got no
    gradient are marked with a red x at the bottom. None when there is nothing to plot."""
    rows = [(n or "(model)", float(v or 0.0)) for n, v in layers]
    if not any(v > 0 for _, v in rows):
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    rows = rows[:80]
    fig = Figure(figsize=(max(5.0, 0.25 * len(rows) + 2), 4.0), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    values = [v for _, v in rows]
    ax.bar(range(len(rows)), [v if v > 0 else float("nan") for v in values], color="#3b6ea5")
    ax.set_yscale("log")
    floor = min(v for v in values if v > 0) / 10
    dead = [i for i, v in enumerate(values) if v <= 0]
    if dead:
        ax.scatter(dead, [floor] * len(dead), marker="x", color="#c0392b", label="no gradient", zorder=3)
        ax.legend(loc="upper left", fontsize=7)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([n[-28:] for n, _ in rows], rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("gradient RMS")
    ax.set_title(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
