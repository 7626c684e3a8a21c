"""Knowledge tools (issue 8): `lookup_constraints` and `search_literature`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from trainsleuth.server.registry import (
    AnalysisInput,
    AnalysisOutput,
    ToolCall,
    ToolFailure,
    ToolRegistry,
    WorkspacePath,
)

ISSUE = 8

Kind = Literal["constraint", "failure_mode", "checklist", "fix_pattern"]
Source = Literal["arxiv", "github", "stackexchange", "web"]


class KnowledgeHit(BaseModel):
    kind: str
    id: str = Field(description="constraint number (e.g. '9a', or 'docs/topic.md#3'), or catalog id")
    title: str
    pointer: str = Field(description="file:line for project constraints, a resource URI for catalog entries")
    score: float
    snippet: str = ""
    text: str | None = Field(
        default=None, description="the constraint's full text (project constraints only)"
    )


class LookupInput(AnalysisInput):
    query: str = Field(min_length=1, max_length=20_000)
    limit: int = Field(default=10, ge=1, le=50)
    kinds: list[Kind] | None = None
    constraints_file: WorkspacePath | None = None


class LookupOutput(AnalysisOutput):
    query: str
    constraints_file: str
    constraints_parsed: int
    exact: list[KnowledgeHit] = Field(default_factory=list, description="entries addressed by number")
    hits: list[KnowledgeHit] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)

    def render_text(self) -> str:
        lines = [
            f"{len(self.exact) + len(self.hits)} knowledge entries for {self.query[:80]!r} "
            f"({self.constraints_parsed} project constraints parsed from {self.constraints_file})"
        ]
        for h in self.exact:
            lines.append(f"= constraint {h.id}: {h.title} [{h.pointer}]")
            if h.text:
                lines += [f"    {ln}" for ln in h.text.splitlines()[:20]]
        for i, h in enumerate(self.hits, 1):
            label = f"constraint {h.id}" if h.kind == "constraint" else f"{h.kind.replace('_', ' ')} {h.id}"
            lines.append(f"{i}. {label}: {h.title} [{h.pointer}] score {h.score}")
            if h.snippet:
                lines.append(f"    {h.snippet}")
        for p in self.problems:
            lines.append(f"note: {p}")
        if not self.exact and not self.hits:
            lines.append(
                "No match: rephrase with the symptom's key words (e.g. 'NaN loss fp16', 'hang barrier')."
            )
        return "\n".join(lines)


def lookup_handler(args: LookupInput, call: ToolCall) -> LookupOutput:
    from trainsleuth.knowledge.search import index_for

    workspace = call.ctx.workspace
    cfile = Path(args.constraints_file) if args.constraints_file else None
    if cfile is not None and not cfile.is_file():
        raise ToolFailure(
            f"constraints file {cfile} does not exist",
            "pass the path of the project's constraints markdown file, or omit constraints_file for the default",
        )
    index, pk = index_for(workspace, cfile)
    kinds: set[str] | None = set(args.kinds) if args.kinds else None
    exact: list[KnowledgeHit] = []
    q = args.query.strip()
    if len(q) <= 120 and (kinds is None or "constraint" in kinds):
        for e in pk.find(q):
            exact.append(
                KnowledgeHit(
                    kind="constraint",
                    id=e.address,
                    title=e.title,
                    pointer=e.pointer,
                    score=0.0,
                    text=e.text()[:4000],
                )
            )
    entries = {e.address: e for e in pk.entries}
    hits: list[KnowledgeHit] = []
    for h in index.search(q, limit=args.limit, kinds=kinds):
        if any(x.id == h.id and x.kind == h.kind for x in exact):
            continue
        text = entries[h.id].text()[:1500] if h.kind == "constraint" and h.id in entries else None
        hits.append(
            KnowledgeHit(
                kind=h.kind,
                id=h.id,
                title=h.title,
                pointer=h.pointer,
                score=h.score,
                snippet=h.snippet,
                text=text,
            )
        )
    return LookupOutput(
        query=args.query,
        constraints_file=str(pk.constraints_file),
        constraints_parsed=len(pk.entries),
        exact=exact,
        hits=hits[: args.limit],
        problems=pk.problems,
    )


# ---------------------------------------------------------------------------- literature


class LiteratureInput(AnalysisInput):
    query: str = Field(min_length=1, max_length=50_000)
    sources: list[Source] | None = None
    limit: int = Field(default=10, ge=1, le=50)
    use_cache: bool = True


class LiteratureItem(BaseModel):
    source: str
    title: str
    url: str
    snippet: str = ""
    date: str | None = None
    score: float
    also_in: list[str] = Field(default_factory=list)
    extra: dict[str, object] = Field(default_factory=dict)


class SourceInfo(BaseModel):
    source: str
    status: str = Field(description="ok | cached | failed | rate_limited | timeout | skipped | disabled")
    message: str = ""
    count: int = 0
    elapsed_s: float = 0.0


class LiteratureOutput(AnalysisOutput):
    query: str
    search_query: str
    results: list[LiteratureItem] = Field(default_factory=list)
    sources: list[SourceInfo] = Field(default_factory=list)
    failed_sources: list[str] = Field(default_factory=list)
    knowledge: list[KnowledgeHit] = Field(default_factory=list)
    elapsed_s: float = 0.0

    def render_text(self) -> str:
        lines = [
            f"Literature for {self.search_query!r}: {len(self.results)} results in {self.elapsed_s:.2f}s"
        ]
        for s in self.sources:
            extra = f" ({s.message})" if s.message else ""
            lines.append(f"- {s.source}: {s.status}, {s.count} results{extra}")
        if self.failed_sources:
            lines.append(
                f"Sources that did not answer: {', '.join(self.failed_sources)}. "
                "The knowledge-base matches below do not need the network."
            )
        for i, r in enumerate(self.results, 1):
            seen = f" (also in {', '.join(r.also_in)})" if r.also_in else ""
            lines.append(f"{i}. [{r.source}] {r.title} <{r.url}>{seen}")
            if r.snippet:
                lines.append(f"    {r.snippet[:240]}")
        if self.knowledge:
            lines.append("Knowledge base:")
            lines += [f"- {k.kind.replace('_', ' ')} {k.id}: {k.title} [{k.pointer}]" for k in self.knowledge]
        return "\n".join(lines)

    def evidence_summary(self) -> str:
        failed = f"; failed: {', '.join(self.failed_sources)}" if self.failed_sources else ""
        return f"literature for {self.search_query[:120]!r}: {len(self.results)} results{failed}"


def literature_handler(args: LiteratureInput, call: ToolCall) -> LiteratureOutput:
    from trainsleuth.tools.literature import LiteratureConfig, search_literature

    config = getattr(call.ctx, "literature_config", None) or LiteratureConfig.from_env()
    try:
        store = call.ctx.store
    except Exception:  # no writable state folder: search without a cache
        store = None
    report = search_literature(
        args.query,
        sources=list(args.sources) if args.sources else None,
        limit=args.limit,
        config=config,
        store=store,
        workspace=call.ctx.workspace,
        use_cache=args.use_cache,
    )
    if not report.search_query:
        raise ToolFailure("the query is empty after cleaning", "pass the error message or a few key words")
    return LiteratureOutput(
        query=report.query[:2000],
        search_query=report.search_query,
        results=[LiteratureItem.model_validate(r) for r in report.results],
        sources=[SourceInfo.model_validate(s.__dict__) for s in report.sources],
        failed_sources=report.failed_sources,
        knowledge=[KnowledgeHit.model_validate(k) for k in report.knowledge],
        elapsed_s=report.elapsed_s,
    )


def register(registry: ToolRegistry) -> None:
    registry.add(
        "search_literature",
        literature_handler,
        input_model=LiteratureInput,
        output_model=LiteratureOutput,
        description="Unfamiliar errors: search arXiv, GitHub issues, Stack Exchange.",
        title="Search literature",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=True,
    )
    registry.add(
        "lookup_constraints",
        lookup_handler,
        input_model=LookupInput,
        output_model=LookupOutput,
        description="Forming hypotheses: known constraints and failure modes.",
        title="Lookup constraints",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )
