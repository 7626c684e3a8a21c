"""The knowledge base as MCP resources: `checklist://{name}`, `failure-mode://{id}`, `fix-pattern://{id}`.

Every built-in entry is registered as a concrete resource (so `resources/list` lets a client browse
them) and the three URI templates resolve any id, including the project's own fix-pattern records
(`fix-pattern://FP-003`, read from the workspace's fix-patterns file). Listing reads only ids and
titles; an entry's content is parsed on first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources import FunctionResource

from trainsleuth.knowledge import catalog

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from trainsleuth.server.context import ServerContext

MD = "text/markdown"


def failure_mode_text(fid: str) -> str:
    fm = catalog.failure_modes().get(fid)
    if fm is None:
        raise ResourceNotFoundError(
            f"no failure mode {fid!r}; read knowledge://index for the list, or call lookup_constraints "
            "with the symptom"
        )
    return fm.to_markdown()


def checklist_text(name: str) -> str:
    cl = catalog.checklists().get(name)
    if cl is None:
        raise ResourceNotFoundError(
            f"no checklist {name!r}; available: {', '.join(sorted(catalog.checklists()))}"
        )
    return cl.to_markdown()


def fix_pattern_text(pid: str, ctx: ServerContext) -> str:
    fp = catalog.fix_patterns().get(pid)
    if fp is not None:
        return fp.to_markdown()
    from trainsleuth.knowledge.capture import parse_fix_patterns
    from trainsleuth.knowledge.constraints import fix_patterns_path, read_text_bounded

    path = fix_patterns_path(ctx.workspace)
    if path.is_file():
        for rec in parse_fix_patterns(read_text_bounded(path)):
            if rec["id"].lower() == pid.lower():
                lines = [f"# Fix pattern {rec['id']}: {rec.get('title', '')}", "", f"From {path}", ""]
                for key in ("date", "symptom", "root_cause", "fix", "lesson", "related_constraint"):
                    if key in rec:
                        lines.append(f"- **{key.replace('_', ' ').title()}:** {rec[key]}")
                return "\n".join(lines) + "\n"
    raise ResourceNotFoundError(
        f"no fix pattern {pid!r} in the built-in archive or in {path}; read knowledge://index for the list"
    )


def constraint_text(number: str, ctx: ServerContext) -> str:
    from trainsleuth.knowledge.constraints import load_project

    pk = load_project(ctx.workspace)
    found = [e for e in pk.find(number) if e.path == pk.constraints_file]
    if not found:
        have = ", ".join(e.address for e in pk.entries if e.path == pk.constraints_file) or "none"
        raise ResourceNotFoundError(
            f"no constraint {number!r} in {pk.constraints_file} (entries: {have[:400]})"
        )
    e = found[0]
    where = f" · {e.category}" if e.category else ""
    return f"# Constraint {e.number}: {e.title}\n\n{e.pointer}{where}\n\n{e.body}\n"


def index_text(ctx: ServerContext) -> str:
    q = catalog.quick_index()
    out = ["# trainsleuth knowledge base", ""]
    out += ["## Checklists", *[f"- checklist://{i}: {t}" for i, t in q["checklist"]], ""]
    by_topic: dict[str, list[str]] = {}
    for fm in catalog.failure_modes().values():
        by_topic.setdefault(fm.topic, []).append(f"- failure-mode://{fm.id}: {fm.title}")
    out.append("## Failure modes")
    for topic in catalog.TOPICS:
        if topic in by_topic:
            out += ["", f"### {topic}", *by_topic[topic]]
    out += ["", "## Fix patterns", *[f"- fix-pattern://{i}: {t}" for i, t in q["fix_pattern"]]]
    from trainsleuth.knowledge.capture import parse_fix_patterns
    from trainsleuth.knowledge.constraints import fix_patterns_path, read_text_bounded

    path = fix_patterns_path(ctx.workspace)
    if path.is_file():
        records = parse_fix_patterns(read_text_bounded(path))
        if records:
            out += ["", f"### This project ({path.name})"]
            out += [f"- fix-pattern://{r['id']}: {r.get('symptom', r.get('title', ''))}" for r in records]
    return "\n".join(out) + "\n"


def register(server: MCPServer, ctx: ServerContext) -> None:
    q = catalog.quick_index()
    for fid, title in q["failure_mode"]:
        server.add_resource(
            FunctionResource(
                uri=f"failure-mode://{fid}",
                name=f"failure-mode-{fid}",
                title=title,
                description="Failure mode: symptoms, finding codes, root causes, checks, fixes, sources.",
                mime_type=MD,
                fn=lambda fid=fid: failure_mode_text(fid),
            )
        )
    for name, title in q["checklist"]:
        server.add_resource(
            FunctionResource(
                uri=f"checklist://{name}",
                name=f"checklist-{name}",
                title=f"Checklist: {title}",
                description="A checklist to walk through, with the tools to use and failure modes behind each item.",
                mime_type=MD,
                fn=lambda name=name: checklist_text(name),
            )
        )
    for pid, title in q["fix_pattern"]:
        server.add_resource(
            FunctionResource(
                uri=f"fix-pattern://{pid}",
                name=f"fix-pattern-{pid}",
                title=title,
                description="A fix pattern: symptom, root cause, fix, lesson, with code before and after.",
                mime_type=MD,
                fn=lambda pid=pid: fix_pattern_text(pid, ctx),
            )
        )

    @server.resource(
        "knowledge://index",
        name="knowledge-index",
        title="Knowledge base index",
        description="Every checklist, failure mode (by topic) and fix pattern, including this project's records.",
        mime_type=MD,
    )
    def knowledge_index() -> str:
        return index_text(ctx)

    @server.resource(
        "failure-mode://{id}",
        name="failure-mode",
        title="Failure mode",
        description="A failure-mode catalog entry by id (see knowledge://index).",
        mime_type=MD,
    )
    def failure_mode_template(id: str) -> str:
        return failure_mode_text(id)

    @server.resource(
        "checklist://{name}",
        name="checklist",
        title="Checklist",
        description="A debugging checklist by name (see knowledge://index).",
        mime_type=MD,
    )
    def checklist_template(name: str) -> str:
        return checklist_text(name)

    @server.resource(
        "constraint://{number}",
        name="constraint",
        title="Project constraint",
        description="One of the project's own constraints by its number (e.g. constraint://9a).",
        mime_type=MD,
    )
    def constraint_template(number: str) -> str:
        return constraint_text(number, ctx)

    @server.resource(
        "fix-pattern://{id}",
        name="fix-pattern",
        title="Fix pattern",
        description="A fix pattern by id: built-in archive, or this project's records (FP-001, ...).",
        mime_type=MD,
    )
    def fix_pattern_template(id: str) -> str:
        return fix_pattern_text(id, ctx)
