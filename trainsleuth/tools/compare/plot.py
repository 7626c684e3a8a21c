"""PNG of both runs, metric by metric, with the good run's band and the divergence marked."""

from __future__ import annotations

import io

from trainsleuth.tools.compare.band import Curve, MetricResult

MAX_PANELS = 4


def render_png(
    pairs: list[tuple[MetricResult, list[Curve], Curve]], first_step: float | None, labels: tuple[str, str]
) -> bytes | None:
    """One panel per compared metric (diverged ones first); None when nothing was compared."""
    panels = [p for p in pairs if p[0].compared][:MAX_PANELS]
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 2.3 * len(panels) + 0.7), dpi=90)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (res, goods, bad) in zip(axes, panels, strict=False):
        if res.band_steps:
            ax.fill_between(res.band_steps, res.band_low, res.band_high, color="#9ecae1", alpha=0.45,
                            lw=0, label="good run's noise band")  # fmt: skip
        for i, g in enumerate(goods):
            ax.plot(g.steps, g.values, lw=0.9, color="#1f77b4", alpha=1.0 if i == 0 else 0.5,
                    label=f"{labels[0]}: {g.name}" if i == 0 else None)  # fmt: skip
        ax.plot(bad.steps, bad.values, lw=0.9, color="#d62728", label=f"{labels[1]}: {bad.name}")
        if res.first_step is not None:
            ax.axvline(res.first_step, color="#d62728", ls="--", lw=0.9)
            ax.annotate(f"leaves band @ {res.first_step:g}", (res.first_step, 1.0),
                        xycoords=("data", "axes fraction"), fontsize=7, rotation=90, va="top", ha="right",
                        color="#d62728")  # fmt: skip
        if first_step is not None and res.first_step != first_step:
            ax.axvline(first_step, color="#7f7f7f", ls=":", lw=0.8)
        if res.parts_at is not None:
            ax.axvline(res.parts_at, color="#ff7f0e", ls=":", lw=0.9)
        vals = [v for v in [*bad.values, *(v for g in goods for v in g.values)] if v > 0]
        if res.role in ("grad_norm", "loss_scale", "lr") and vals and max(vals) / min(vals) > 100:
            ax.set_yscale("log")
        ax.set_ylabel(f"{res.role}\n{res.status}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel("step")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
