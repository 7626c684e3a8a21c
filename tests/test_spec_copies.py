"""docs/spec/ carries copies of the public contract; they must match the project's spec beside the checkout.

The findings copy may carry an appended "Additions" section: codes the project added (the spec says
"add new codes freely"); every added code in the code base is documented there and nowhere dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO.parent / "shared" / "spec"
ADDITIONS_MARKER = "<!-- additions:"


def _copy_body(name: str) -> str:
    copy = (REPO / "docs" / "spec" / name).read_text(encoding="utf-8")
    assert copy.startswith("<!-- Copy of the project's public contract")
    return copy.split("\n", 1)[1]


def test_interface_copy_matches_the_spec() -> None:
    assert _copy_body("interface.md") == (SPEC / "interface.md").read_text(encoding="utf-8")


def test_findings_copy_is_the_spec_plus_additions() -> None:
    body = _copy_body("findings.md")
    spec = (SPEC / "findings.md").read_text(encoding="utf-8")
    assert body.startswith(spec), "docs/spec/findings.md must begin with shared/spec/findings.md verbatim"
    rest = body[len(spec) :]
    assert rest == "" or rest.lstrip("\n").startswith(ADDITIONS_MARKER)


def _table_codes(text: str) -> set[str]:
    codes = set(re.findall(r"^\| `([a-z_]+)`", text, flags=re.M))
    return codes - {"code", "severity", "message", "step", "evidence", "module", "metric", "failure_modes"}


def test_every_spec_code_is_known_to_the_code() -> None:
    from trainsleuth.tools.findings import known_codes

    codes = _table_codes((SPEC / "findings.md").read_text(encoding="utf-8"))
    assert len(codes) >= 30
    assert codes <= known_codes()


def test_every_added_code_is_documented_and_none_shadows_the_spec() -> None:
    from trainsleuth.tools.findings import EXTRA_CODES

    spec_codes = _table_codes((SPEC / "findings.md").read_text(encoding="utf-8"))
    body = _copy_body("findings.md")
    additions = body[body.find(ADDITIONS_MARKER) :] if ADDITIONS_MARKER in body else ""
    documented = _table_codes(additions)
    assert set(EXTRA_CODES) <= documented, sorted(set(EXTRA_CODES) - documented)
    assert not (documented & spec_codes), "an addition reuses a spec code"
