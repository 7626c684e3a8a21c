"""Project constraints: both layouts parsed, entries addressable by number, ranked with the catalog by
symptom text, and new constraints / fix patterns appended in the file's own format."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainsleuth.knowledge.capture import (
    CaptureError,
    append_constraint,
    append_fix_pattern,
    parse_fix_patterns,
)
from trainsleuth.knowledge.constraints import (
    constraints_path,
    fix_patterns_path,
    load_project,
    parse_text,
)
from trainsleuth.knowledge.lookup import suggest_for_symptom
from trainsleuth.knowledge.search import index_for

HEADING_LAYOUT = """\
# Hard constraints for the speech-codec training repo

Read this before touching the training loop. Details per topic live in
[distributed notes](topics/distributed.md) and `topics/numerics.md`.

## Numerics

### 1. Never take the log of a probability

**Rule:** compute log-probabilities from logits with `log_softmax`.

- The codebook loss once went to -inf because softmax underflowed.
- See FP-001.

### 2. Norm layers run in fp32

RMSNorm upcasts its input; do not remove the `.float()`.

```python
### 99. this heading sits in a code block and is not an entry
x = x.float()
```

## Distributed

### 9. Every rank reaches every collective

No `dist.barrier()` or `all_reduce` inside `if rank == 0:`.

### 9a. Checkpoint saving is collective

All ranks enter `save_checkpoint`; rank 0 writes, the others wait at the same barrier.

### 10. Seed model init identically on every rank

Frozen codebooks are not broadcast by DDP.

## Data

### 11. Shuffle with set_epoch

Call `sampler.set_epoch(epoch)` every epoch.
"""

LIST_LAYOUT = """\
# Constraints

These rules are enforced in review.

## Training loop
1. **Call `optimizer.zero_grad()` once per optimizer step.**
   - With gradient accumulation, only after `optimizer.step()`.
   - Never inside the micro-batch loop.
2. **Evaluation runs under `model.eval()` and `torch.no_grad()`.** Restore `model.train()` afterwards.
   - Forgetting it left dropout off for a week of runs.

## Reward
3. **Reward functions return floats in [0, 1].**
   - Parsing failures return 0.0, never raise.
4. **Advantages are normalised per prompt group.**
   - Groups with zero reward variance are dropped (no signal).
"""

TOPIC_DISTRIBUTED = """\
# Distributed notes

1. **Use DistributedSampler with drop_last=True.** Uneven batches desynchronise collectives.
2. **Sequence-parallel outputs are gathered before the loss.**
   - Otherwise each rank averages over its shard only.
"""

TOPIC_NUMERICS = """\
# Numerics notes

## Loss scaling

Use GradScaler for fp16 and unscale before clipping.

## Epsilons

Norm eps must be representable in the compute dtype.
"""


def write_knowledge(ws: Path, main: str = HEADING_LAYOUT) -> Path:
    kdir = ws / ".agents" / "knowledge"
    (kdir / "topics").mkdir(parents=True)
    (kdir / "constraints.md").write_text(main, encoding="utf-8")
    (kdir / "topics" / "distributed.md").write_text(TOPIC_DISTRIBUTED, encoding="utf-8")
    (kdir / "topics" / "numerics.md").write_text(TOPIC_NUMERICS, encoding="utf-8")
    return kdir / "constraints.md"


def test_heading_layout_entries_categories_and_inserted_numbers(tmp_path: Path) -> None:
    parsed = parse_text(HEADING_LAYOUT, tmp_path / "c.md")
    assert parsed.layout == "heading"
    assert [e.number for e in parsed.entries] == ["1", "2", "9", "9a", "10", "11"]
    assert parsed.categories == ["Numerics", "Distributed", "Data"]
    by = {e.number: e for e in parsed.entries}
    assert by["9a"].title == "Checkpoint saving is collective" and by["9a"].category == "Distributed"
    assert by["1"].category == "Numerics" and "log_softmax" in by["1"].body and "FP-001" in by["1"].body
    assert "99. this heading" in by["2"].body  # fenced code stays body text, not an entry
    assert by["11"].category == "Data"
    lines = HEADING_LAYOUT.splitlines()
    assert lines[by["9a"].line - 1].startswith("### 9a.")
    assert lines[by["9a"].end_line - 1].startswith("All ranks enter")
    assert parsed.links == ["topics/distributed.md", "topics/numerics.md"]


def test_list_layout_entries_with_bullet_details(tmp_path: Path) -> None:
    parsed = parse_text(LIST_LAYOUT, tmp_path / "c.md")
    assert parsed.layout == "list"
    assert [e.number for e in parsed.entries] == ["1", "2", "3", "4"]
    by = {e.number: e for e in parsed.entries}
    assert by["1"].title == "Call optimizer.zero_grad() once per optimizer step"
    assert "only after `optimizer.step()`" in by["1"].body and "micro-batch loop" in by["1"].body
    assert by["2"].body.startswith("Restore `model.train()` afterwards.")
    assert by["2"].category == "Training loop" and by["4"].category == "Reward"
    assert "zero reward variance" in by["4"].body


def test_project_loads_topic_docs_and_addresses_entries(workspace: Path) -> None:
    write_knowledge(workspace)
    pk = load_project(workspace)
    assert pk.problems == []
    assert [e.address for e in pk.find("9a")] == ["9a"]
    assert pk.find("#11")[0].title == "Shuffle with set_epoch"
    topic = pk.find(".agents/knowledge/topics/distributed.md#2")
    assert topic and topic[0].title == "Sequence-parallel outputs are gathered before the loss"
    sections = {e.address for e in pk.entries if "numerics.md" in e.address}
    assert sections == {
        ".agents/knowledge/topics/numerics.md#loss-scaling",
        ".agents/knowledge/topics/numerics.md#epsilons",
    }


def test_missing_and_escaping_topic_docs_are_reported_not_fatal(workspace: Path) -> None:
    kdir = workspace / ".agents" / "knowledge"
    kdir.mkdir(parents=True)
    (kdir / "constraints.md").write_text(
        "# C\n\nSee [gone](gone.md) and [outside](../../../../etc/passwd.md).\n\n### 1. Rule one\n\nBody.\n",
        encoding="utf-8",
    )
    pk = load_project(workspace)
    assert [e.number for e in pk.entries] == ["1"]
    assert any("gone.md" in p and "does not exist" in p for p in pk.problems)
    assert any("outside the workspace" in p for p in pk.problems)


def test_paths_are_configurable(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A project without `.agents/knowledge/` keeps trainsleuth's knowledge out of its repository...
    assert constraints_path(workspace) == workspace / ".trainsleuth/knowledge/constraints.md"
    assert fix_patterns_path(workspace) == workspace / ".trainsleuth/knowledge/fix-patterns.md"
    # ...one that keeps the folder shares it through the repository.
    (workspace / ".agents" / "knowledge").mkdir(parents=True)
    assert constraints_path(workspace) == workspace / ".agents/knowledge/constraints.md"
    (workspace / "pyproject.toml").write_text(
        '[tool.trainsleuth.knowledge]\nconstraints_file = "docs/RULES.md"\nfix_patterns_file = "docs/fixes.md"\n',
        encoding="utf-8",
    )
    assert constraints_path(workspace) == workspace / "docs/RULES.md"
    assert fix_patterns_path(workspace) == workspace / "docs/fixes.md"
    monkeypatch.setenv("TRAINSLEUTH_CONSTRAINTS_FILE", "other/c.md")
    assert constraints_path(workspace) == workspace / "other/c.md"
    (workspace / "other").mkdir()
    (workspace / "other" / "c.md").write_text(LIST_LAYOUT, encoding="utf-8")
    assert len(load_project(workspace).entries) == 4


@pytest.mark.parametrize(
    ("symptom", "expected"),
    [
        ("training hangs when rank 0 saves a checkpoint", "9a"),
        ("codebook loss becomes -inf, log of softmax probability", "1"),
        ("gradients accumulate across micro-batch steps, zero_grad", "1"),
        ("GRPO advantages zero, reward variance zero in prompt group", "4"),
    ],
)
def test_lookup_by_symptom_ranks_the_right_constraint_first(
    workspace: Path, symptom: str, expected: str
) -> None:
    main = HEADING_LAYOUT if expected in {"9a", "1"} and "zero_grad" not in symptom else LIST_LAYOUT
    write_knowledge(workspace, main)
    index, _ = index_for(workspace)
    hits = [h for h in index.search(symptom, limit=10) if h.kind == "constraint"]
    assert hits and hits[0].id == expected, [(h.id, h.title, h.score) for h in hits]
    assert hits[0].pointer.startswith(str(workspace / ".agents/knowledge/constraints.md") + ":")


def test_suggest_for_symptom_mixes_constraints_catalog_and_checklists(workspace: Path) -> None:
    write_knowledge(workspace)
    out = suggest_for_symptom(workspace, "job hangs at a barrier during checkpoint save on rank 0", limit=8)
    assert 1 <= len(out) <= 8
    assert set(out[0]) == {"kind", "id", "title", "pointer", "score", "why"}  # why: the domain signal
    kinds = {o["kind"] for o in out}
    assert {"constraint", "failure_mode"} <= kinds and kinds <= {"constraint", "failure_mode", "checklist"}
    assert any(
        o["id"] == "barrier-mismatch" and o["pointer"] == "failure-mode://barrier-mismatch" for o in out
    )
    scores = [o["score"] for o in out]
    assert scores == sorted(scores, reverse=True)


def test_suggest_without_knowledge_files_still_answers(workspace: Path) -> None:
    out = suggest_for_symptom(workspace, "loss is NaN after enabling fp16 autocast", limit=5)
    assert out and all(o["kind"] in {"failure_mode", "checklist"} for o in out)
    assert suggest_for_symptom(workspace, "", limit=5) == []
    assert suggest_for_symptom(workspace / "does-not-exist", "nan", limit=3)  # never raises


def test_index_follows_edits_to_the_constraints_file(workspace: Path) -> None:
    path = write_knowledge(workspace)
    index, _ = index_for(workspace)
    assert not [h for h in index.search("tokenizer vocabulary mismatch", limit=20) if h.kind == "constraint"]
    append_constraint(
        path, title="Tokenizer vocabulary matches the embedding size", rule="Check vocab size.", details=[]
    )
    index2, _ = index_for(workspace)
    hits = [h for h in index2.search("tokenizer vocabulary mismatch", limit=20) if h.kind == "constraint"]
    assert hits and hits[0].id == "12"


# ---------------------------------------------------------------------------- capture


def test_append_constraint_heading_layout_into_its_category(tmp_path: Path) -> None:
    path = tmp_path / "constraints.md"
    path.write_text(HEADING_LAYOUT, encoding="utf-8")
    number = append_constraint(
        path,
        title="Gather sequence-parallel outputs before the loss",
        rule="The loss sees the whole sequence on every rank.",
        details=["Check the loss against a single-GPU run.", "Reduce token counts across the group."],
        category="distributed",
    )
    assert number == "12"  # next after 11, ignoring the 9a suffix and the fenced 99
    text = path.read_text(encoding="utf-8")
    assert text.startswith(HEADING_LAYOUT.split("## Data")[0].rstrip())  # nothing before it changed
    block = (
        "### 12. Gather sequence-parallel outputs before the loss\n\n"
        "**Rule:** The loss sees the whole sequence on every rank.\n\n"
        "- Check the loss against a single-GPU run.\n"
        "- Reduce token counts across the group.\n\n"
        "## Data\n"
    )
    assert block in text
    parsed = parse_text(text, path)
    entry = next(e for e in parsed.entries if e.number == "12")
    assert entry.category == "Distributed"
    assert [e.number for e in parsed.entries][-1] == "11"


def test_append_constraint_list_layout_new_category_and_end(tmp_path: Path) -> None:
    path = tmp_path / "constraints.md"
    path.write_text(LIST_LAYOUT, encoding="utf-8")
    assert (
        append_constraint(path, title="Log the reward std", rule="", details=["Per step."], category="Reward")
        == "5"
    )
    assert (
        append_constraint(
            path,
            title="Checkpoints hold the scaler",
            rule="Save GradScaler state.",
            details=[],
            category="Checkpoints",
        )
        == "6"
    )
    text = path.read_text(encoding="utf-8")
    assert text.startswith(LIST_LAYOUT.rstrip("\n"))
    assert (
        "   - Groups with zero reward variance are dropped (no signal).\n5. **Log the reward std.**\n   - Per step.\n"
        in text
    )
    assert text.endswith("## Checkpoints\n6. **Checkpoints hold the scaler.** Save GradScaler state.\n")
    parsed = parse_text(text, path)
    assert parsed.layout == "list"
    assert {e.number: e.category for e in parsed.entries}["5"] == "Reward"


def test_append_constraint_creates_a_missing_file_and_keeps_crlf(tmp_path: Path) -> None:
    new = tmp_path / "k" / "constraints.md"
    assert (
        append_constraint(new, title="First rule", rule="Do it.", details=["why"], category="General") == "1"
    )
    assert parse_text(new.read_text(encoding="utf-8"), new).entries[0].title == "First rule"
    crlf = tmp_path / "crlf.md"
    crlf.write_bytes(LIST_LAYOUT.replace("\n", "\r\n").encode())
    append_constraint(crlf, title="Another", rule="x", details=[])
    data = crlf.read_bytes()
    assert b"\r\n5. **Another.** x\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")


def test_append_constraint_refuses_bad_input_without_touching_the_file(tmp_path: Path) -> None:
    path = tmp_path / "constraints.md"
    path.write_text(LIST_LAYOUT, encoding="utf-8")
    with pytest.raises(CaptureError, match="title is empty"):
        append_constraint(path, title="  ", rule="r", details=[])
    (tmp_path / "dir.md").mkdir()
    with pytest.raises(CaptureError, match="not a file"):
        append_constraint(tmp_path / "dir.md", title="t", rule="r", details=[])
    binary = tmp_path / "bin.md"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(CaptureError, match="not UTF-8"):
        append_constraint(binary, title="t", rule="r", details=[])
    assert path.read_text(encoding="utf-8") == LIST_LAYOUT
    assert binary.read_bytes() == b"\xff\xfe\x00bad"


def test_append_fix_pattern_records_and_numbering(tmp_path: Path) -> None:
    path = tmp_path / "fix-patterns.md"
    first = append_fix_pattern(
        path,
        date="2026-03-01",
        symptom="Loss NaN at step 40 in fp16",
        root_cause="log of softmax underflowed",
        fix="use log_softmax",
        lesson="stay in log space",
        related_constraint="1",
    )
    second = append_fix_pattern(
        path, date="2026-03-02", symptom="Hang at checkpoint", root_cause="rank-0 barrier", fix="collective save",
        lesson="all ranks call collectives", related_constraint=None,
    )  # fmt: skip
    assert (first, second) == ("FP-001", "FP-002")
    text = path.read_text(encoding="utf-8")
    assert (
        "## FP-001: Loss NaN at step 40 in fp16\n\n- **Date:** 2026-03-01\n- **Symptom:** Loss NaN at step 40 in fp16\n"
        in text
    )
    assert (
        "- **Root Cause:** rank-0 barrier\n- **Fix:** collective save\n- **Lesson:** all ranks call collectives\n- **Related Constraint:** none\n"
        in text
    )
    records = parse_fix_patterns(text)
    assert [r["id"] for r in records] == ["FP-001", "FP-002"]
    assert records[0]["related_constraint"] == "1" and records[1]["root_cause"] == "rank-0 barrier"
    with pytest.raises(CaptureError, match="YYYY-MM-DD"):
        append_fix_pattern(path, date="yesterday", symptom="s", root_cause="r", fix="f", lesson="l")


def test_append_fix_pattern_continues_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "fixes.md"
    path.write_text(
        "# Fixes\n\n### FP-007: old one\n\n- **Date:** 2025-01-01\n- **Symptom:** s\n- **Root Cause:** r\n"
        "- **Fix:** f\n- **Lesson:** l\n- **Related Constraint:** none\n",
        encoding="utf-8",
    )
    assert (
        append_fix_pattern(path, date="2026-01-01", symptom="s2", root_cause="r2", fix="f2", lesson="l2")
        == "FP-008"
    )
    assert "\n### FP-008: s2\n" in path.read_text(encoding="utf-8")


def test_top_level_headers_after_the_title_are_categories(tmp_path: Path) -> None:
    text = "# Rules\n\n# Numerics\n\n## 1. Keep norms in fp32\n\nBody.\n\n# Data\n\n## 2. Shuffle\n\nBody.\n"
    parsed = parse_text(text, tmp_path / "c.md")
    assert [(e.number, e.category) for e in parsed.entries] == [("1", "Numerics"), ("2", "Data")]
    path = tmp_path / "c.md"
    path.write_text(text, encoding="utf-8")
    assert (
        append_constraint(path, title="No leakage", rule="Split first.", details=[], category="Data") == "3"
    )
    assert path.read_text(encoding="utf-8").endswith(
        "## 2. Shuffle\n\nBody.\n\n## 3. No leakage\n\nSplit first.\n"
    )
