"""Knowledge tools (issue 8). Placeholders until the knowledge base lands."""

from __future__ import annotations

from trainsleuth.server.registry import AnalysisInput, ToolRegistry

ISSUE = 8


class QueryInput(AnalysisInput):
    query: str
    limit: int = 10


def register(registry: ToolRegistry) -> None:
    registry.placeholder(
        "search_literature",
        input_model=QueryInput,
        description="Search arXiv, GitHub issues, Stack Exchange and the web for a training problem.",
        title="Search literature",
        issue=ISSUE,
        open_world=True,
    )
    registry.placeholder(
        "lookup_constraints",
        input_model=QueryInput,
        description="Rank the project's own constraints and the failure-mode catalog for a symptom.",
        title="Lookup constraints",
        issue=ISSUE,
    )
