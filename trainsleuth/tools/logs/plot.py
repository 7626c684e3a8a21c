"""PNG plot of the key metrics with the events marked and the NaN/Inf stretches shaded
(matplotlib, Agg, imported lazily)."""

from __future__ import annotations

import io
import math
from collections.abc import Iterable

from trainsleuth.tools.findings import Finding
from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.series import Series

PLOT_ROLES = ("loss", "val_loss", "grad_norm", "lr", "loss_scale", "throughput")
_COLORS = {"error": "#d62728", "warning": "#ff7f0e", "info": "#7f7f7f"}


def nonfinite_spans(s: Series) -> list[tuple[float, float]]:
    """The step ranges where a series is NaN or Inf (its runs of non-finite values)."""
    return [(float(r[0]), float(r[1])) for r in s.nonfinite_runs]


def render_png(collector: Collector, events: Iterable[Finding], max_points: int = 1500) -> bytes | None:
    """Return PNG bytes, or None when the log has no series to draw."""
    panels: list[tuple[str, list[Series]]] = []
    by_role: dict[str, list[Series]] = {}
    for s in collector.series.values():
        by_role.setdefault(s.role, []).append(s)
    for role in PLOT_ROLES:
        group = [s for s in by_role.get(role, []) if s.total][:3]
        if group:
            panels.append((role, group))
    if not panels:
        named = [s for s in collector.series.values() if s.total][:2]
        panels = [(s.role, [s]) for s in named]
    if not panels:
        return None
    try:
        import matplotlib
    except ImportError:
        from trainsleuth.tools.extras import MissingExtra

        raise MissingExtra("the metrics plot", "plots") from None

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    events = list(events)
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.2 * len(panels) + 0.6), sharex=True, squeeze=False)
    try:
        for ax, (role, group) in zip(axes[:, 0], panels, strict=False):
            for s in group:
                pts = [p for p in s.downsample(max_points) if math.isfinite(p[1])]
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                line = ax.plot(xs, ys, lw=0.9, label=s.name, marker="." if len(xs) <= 200 else None, ms=3)
                if role in ("grad_norm", "loss_scale") and ys and min(ys) > 0 and max(ys) / min(ys) > 100:
                    ax.set_yscale("log")
                for k, (a, b) in enumerate(nonfinite_spans(s)):  # NaN/Inf: shaded where the values are
                    ax.axvspan(a, b if b > a else a + 1e-9, color=line[0].get_color(), alpha=0.25, lw=2,
                               label=f"{s.name} NaN/Inf" if k == 0 else None)  # fmt: skip
            names = {s.name for s in group}
            for ev in events:
                if ev.step is None or ev.severity == "info":
                    continue
                if ev.metric in names or (ev.metric is None and role == panels[0][0]):
                    ax.axvline(ev.step, color=_COLORS[ev.severity], lw=0.8, ls="--", alpha=0.8)
                    ax.annotate(ev.code, (ev.step, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                                rotation=90, va="top", ha="right", color=_COLORS[ev.severity],
                                annotation_clip=False)  # fmt: skip
            ax.set_ylabel(role, fontsize=8)
            ax.legend(fontsize=7, loc="upper right")
            ax.tick_params(labelsize=7)
        axes[-1, 0].set_xlabel("step")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", pad_inches=0.1)  # labels never clipped
        return buf.getvalue()
    finally:
        plt.close(fig)
