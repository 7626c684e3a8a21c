"""The entrypoint's loss_fn is loss_fn(model, batch). A criterion(output, target) given instead (the most
common mistake in the blind agent benchmark: 3 of its 5 failed calls were the contract learned from
errors) is refused before anything runs, saying how to wrap it, by every runner that loads entrypoints."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TRAINSLEUTH = str(Path(sys.executable).with_name("trainsleuth"))
ENTRY = Path(__file__).resolve().parent / "data" / "entrypoints" / "loss_fn_shapes.py"


def probe(ws: Path, fn: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(ENTRY, ws / "ent.py")
    return subprocess.run(
        [TRAINSLEUTH, "probe", f"ent.py:{fn}", "--steps", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ws,
    )


@pytest.mark.parametrize(
    ("fn", "says"),
    [("module_criterion", "is a CrossEntropyLoss module"), ("output_target", "takes (out, y)")],
)
def test_a_criterion_in_place_of_loss_fn_is_refused_with_the_wrap(
    workspace: Path, fn: str, says: str
) -> None:
    out = probe(workspace, fn)
    assert out.returncode == 3, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert says in text and "loss_fn(model, batch)" in text
    assert "lambda model, batch: criterion(model(batch[0]), batch[1])" in text


def test_the_contract_loss_fn_runs(workspace: Path) -> None:
    out = probe(workspace, "right")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "healthy" in out.stdout
