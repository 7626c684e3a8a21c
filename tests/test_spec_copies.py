"""docs/spec/ carries copies of the public contract; they must match the project's spec beside the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO.parent / "shared" / "spec"


@pytest.mark.parametrize("name", ["interface.md", "findings.md"])
def test_docs_copy_matches_the_spec(name: str) -> None:
    copy = (REPO / "docs" / "spec" / name).read_text(encoding="utf-8")
    assert copy.startswith("<!-- Copy of the project's public contract")
    assert copy.split("\n", 1)[1] == (SPEC / name).read_text(encoding="utf-8")


def test_every_spec_code_is_known_to_the_code() -> None:
    import re

    from trainsleuth.tools.findings import known_codes

    text = (SPEC / "findings.md").read_text(encoding="utf-8")
    codes = set(re.findall(r"^\| `([a-z_]+)`", text, flags=re.M)) - {
        "code",
        "severity",
        "message",
        "step",
        "evidence",
    }
    codes -= {"module", "metric", "failure_modes"}
    assert len(codes) >= 30
    assert codes <= known_codes()
