"""The built-in knowledge base is complete and well-formed: every finding code links to catalog
entries, every entry has what an assistant needs, every reference resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainsleuth.knowledge import catalog
from trainsleuth.knowledge.links import CODE_LINKS, failure_modes_for
from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.findings import LOG_CODES, PROBE_CODES, known_codes

SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "findings.md"

REQUIRED_IDS = {
    # numerics
    "log-of-zero", "division-by-zero", "fp16-overflow", "bf16-accumulation", "epsilon-choice",
    # optimisation
    "lr-too-high", "missing-warmup", "lr-schedule-misconfigured", "missing-zero-grad",
    "grad-accumulation-scaling", "weight-decay-on-norms",
    # data
    "label-errors", "input-not-normalised", "no-shuffling", "data-leakage", "corrupt-samples",
    # architecture
    "dead-relu", "activation-saturation", "missing-residual", "missing-normalisation", "bad-initialisation",
    # training loop
    "train-eval-mode", "no-grad-in-training", "accidental-detach", "frozen-parameters",
    "params-missing-from-optimizer", "loss-reduction-mismatch",
    # mixed precision
    "fp16-loss-scaling", "autocast-weight-cache-stale",
    # distributed
    "barrier-mismatch", "rank-only-collective", "unsynced-frozen-weights", "ddp-unused-parameters",
    "fsdp-zero-mixed-precision", "sequence-parallel-gather", "distributed-checkpoint-keys",
    # RL fine-tuning, codebooks, checkpoints and versions
    "rl-kl-collapse", "rl-entropy-collapse", "zero-variance-advantages",
    "codebook-collapse", "low-codebook-perplexity",
    "checkpoint-key-mismatch", "optimizer-state-not-restored", "version-regression",
}  # fmt: skip

REQUIRED_CHECKLISTS = {
    "distributed-correctness", "numerical-correctness", "training-loop", "data-pipeline", "model-adapter",
    "reward", "configuration", "mixed-precision", "hangs-and-performance",
}  # fmt: skip


def _spec_codes() -> set[str]:
    codes = set(PROBE_CODES | LOG_CODES)
    if SPEC.is_file():  # the spec beside the checkout; the constants in findings.py mirror it
        text = SPEC.read_text(encoding="utf-8")
        tables = text[text.index("\n## ") :]  # the code tables follow the record-field table
        for line in tables.splitlines():
            if line.startswith("| `"):
                codes |= set(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return codes


def test_every_finding_code_links_to_existing_entries() -> None:
    entries = catalog.failure_modes()
    codes = _spec_codes() | set(known_codes())
    assert codes - set(CODE_LINKS) == set(), "finding codes without catalog links"
    assert set(CODE_LINKS) - codes == set(), "links for codes that do not exist"
    for code in codes:
        ids = failure_modes_for(code)
        assert ids, code
        assert len(ids) == len(set(ids)), code
        for fid in ids:
            assert fid in entries, (code, fid)
            assert code in entries[fid].codes  # the reverse direction is derived, and agrees


def test_links_module_stays_import_free() -> None:
    import trainsleuth.knowledge.links as links

    source = Path(links.__file__).read_text(encoding="utf-8")
    imports = [ln for ln in source.splitlines() if ln.startswith(("import ", "from "))]
    assert imports == ["from __future__ import annotations"]


def test_catalog_is_large_and_covers_every_topic() -> None:
    entries = catalog.failure_modes()
    assert len(entries) >= 60
    assert set(entries) >= REQUIRED_IDS, REQUIRED_IDS - set(entries)
    assert {e.topic for e in entries.values()} == set(catalog.TOPICS)


def test_every_entry_is_well_formed() -> None:
    _, registry = build_server(ServerConfig(workspaces=[Path.cwd()]))
    titles: set[str] = set()
    for fid, e in catalog.failure_modes().items():
        assert catalog.ID_PATTERN.match(fid) and e.id == fid
        assert e.title and e.title not in titles, fid
        titles.add(e.title)
        assert e.symptoms and e.root_causes and e.fixes and e.sources and e.checks, fid
        for text in [*e.symptoms, *e.root_causes, *e.sources]:
            assert isinstance(text, str) and len(text.strip()) >= 10, (fid, text)
        for fix in e.fixes:
            assert len(fix.fix) >= 10 and len(fix.trade_off) >= 4, fid
        for check in e.checks:
            assert len(check.look_for) >= 10, fid
            if check.tool == "manual":
                assert not check.args, fid
                continue
            assert check.tool in registry.tools, (fid, check.tool)
            fields = registry.tools[check.tool].input_model.model_fields
            assert set(check.args) <= set(fields), (fid, check.tool, set(check.args) - set(fields))
        md = e.to_markdown()
        for section in ("## Symptoms", "## Root causes", "## Checks to run", "## Fixes", "## Sources"):
            assert section in md, (fid, section)


def test_checklists_and_fix_patterns_reference_real_entries() -> None:
    entries = catalog.failure_modes()
    lists = catalog.checklists()
    assert set(lists) == REQUIRED_CHECKLISTS
    for name, cl in lists.items():
        assert len(cl.items) >= 5, name
        for item in cl.items:
            assert item.check and item.how
            assert set(item.failure_modes) <= set(entries), (name, item.check)
        assert cl.to_markdown().startswith(f"# Checklist: {cl.title}")
    patterns = catalog.fix_patterns()
    assert len(patterns) >= 10
    for pid, fp in patterns.items():
        assert set(fp.failure_modes) <= set(entries), pid
        assert all(getattr(fp, f) for f in ("symptom", "root_cause", "fix", "lesson")), pid
        md = fp.to_markdown()
        assert "**Root Cause:**" in md and "**Lesson:**" in md


def test_quick_index_agrees_with_the_full_parse() -> None:
    quick = catalog.quick_index()
    assert dict(quick["failure_mode"]) == {k: v.title for k, v in catalog.failure_modes().items()}
    assert dict(quick["checklist"]) == {k: v.title for k, v in catalog.checklists().items()}
    assert dict(quick["fix_pattern"]) == {k: v.title for k, v in catalog.fix_patterns().items()}


def test_malformed_entries_are_rejected_with_the_reason() -> None:
    good = next(iter(catalog.failure_modes().values())).model_dump()
    with pytest.raises(ValueError, match="kebab-case"):
        catalog.FailureMode.model_validate({**good, "id": "Not_Kebab"})
    with pytest.raises(ValueError, match="unknown topic"):
        catalog.FailureMode.model_validate({**good, "topic": "astrology"})
    with pytest.raises(ValueError):
        catalog.FailureMode.model_validate({**good, "fixes": []})


@pytest.mark.parametrize(
    ("symptom", "expected"),
    [
        ("loss becomes NaN after log of softmax", "log-of-zero"),
        ("KL stuck at zero in PPO", "rl-kl-collapse"),
        ("GRPO loss is exactly zero, all rewards in the group equal", "zero-variance-advantages"),
        ("validation loss goes up while training loss decreases", "overfitting-regularisation"),
        ("NaN only with fp16, fine in fp32", "fp16-overflow"),
        ("codebook usage collapses, few codes used", "codebook-collapse"),
        ("memory grows every step until OOM", "retained-graph-memory"),
        (
            "second forward under autocast uses the old weights after optimizer step",
            "autocast-weight-cache-stale",
        ),
        ("loaded checkpoint has missing keys with a module. prefix", "distributed-checkpoint-keys"),
        ("gradient norm spikes, then the loss spikes", "missing-grad-clipping"),
    ],
)
def test_symptoms_find_their_catalog_entry(symptom: str, expected: str) -> None:
    from trainsleuth.knowledge.search import builtin_index

    hits = builtin_index().search(symptom, limit=4, kinds={"failure_mode"})
    assert expected in [h.id for h in hits[:3]], [(h.id, h.score) for h in hits]
