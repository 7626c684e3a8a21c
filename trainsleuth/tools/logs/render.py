"""Plain-text wording shared by the CLI and the MCP tool's text rendering."""

from __future__ import annotations

from typing import Any


def verdict_line(verdict: str, judged: list[str]) -> str:
    what = f" (judged on {', '.join(judged[:3])})" if judged else ""
    if verdict == "healthy":
        return f"healthy{what}: no warning or error events"
    if verdict == "problems":
        return "problems found"
    if judged:
        return f"NOT JUDGED: {', '.join(judged[:3])} is too short to show a trend, so nothing was judged (not a healthy verdict)"
    return "NOT UNDERSTOOD: no loss series was recognised, so nothing was judged (not a healthy verdict)"


def value(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def parse_lines(parse: dict[str, Any]) -> list[str]:
    """The parse report as a few readable lines."""
    out = []
    if parse.get("step_source"):
        out.append(
            "steps from: " + "; ".join(f"{src} ({n} records)" for src, n in parse["step_source"].items())
        )
    if parse.get("decided"):
        out.append("roles decided: " + "; ".join(f"{k} -> {how}" for k, how in parse["decided"].items()))
    if parse.get("skipped"):
        ex = parse.get("skipped_example", {})
        out.append(
            "skipped lines: "
            + "; ".join(
                f"{n} {why}" + (f" (e.g. {ex[why]!r})" if why in ex else "")
                for why, n in parse["skipped"].items()
            )
        )
    if parse.get("units"):
        out.append("units: " + ", ".join(f"{k} [{u}]" for k, u in parse["units"].items()))
    if parse.get("resolution"):
        out.append("printed to: " + ", ".join(f"{k} {r:g}" for k, r in parse["resolution"].items()))
    return out
