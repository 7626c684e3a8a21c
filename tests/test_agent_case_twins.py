"""The healthy twin of every agent case: the playbook's decisive call, made on the FIXED tree, is quiet.

The playbook tests (tests/test_agent_playbooks.py) pin the decisive finding on each case as built. A
finding is only evidence if it goes away when the bug does: here each case is built, its fix.patch
applied, and the very call the playbook marks decisive (same tool, same arguments: the user's own
command) is made through `trainsleuth client call`. It must report no finding of the decisive code and
no error at all; the fixed tree trains as check.sh demands, so anything else would be a false alarm.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.agent.build import CASES, build_case
from benchmarks.agent.playbooks import case_env
from trainsleuth.clients.scripted import load_playbook

# The cases whose decisive call is one diagnostic call on the user's own command (issue 26).
TWINS = ["forecaster_zero_init", "vendored_ffn", "trainer_fit_loss", "ddp_rank_state"]
TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")


def decisive_step(case: str, repo: Path) -> dict[str, Any]:
    playbook = load_playbook(CASES / case / "playbook.yaml", workspace=repo)
    (step,) = [s for s in playbook.steps if "decisive" in str(s.get("name", ""))]
    return step


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", TWINS)
def test_the_decisive_call_is_quiet_on_the_fixed_tree(case: str, tmp_path: Path) -> None:
    repo = build_case(case, tmp_path / case)
    subprocess.run(["git", "apply", str(CASES / case / "fix.patch")], cwd=repo, check=True)
    step = decisive_step(case, repo)
    decisive_code = step["expect"]["equals"]["findings.0.code"]
    proc = subprocess.run(
        [TRAINSLEUTH, "client", "call", step["tool"], "--args-json", json.dumps(step["args"]), "--json",
         "--wait", "900", "--workspace", str(repo)],
        cwd=repo, env=case_env(tmp_path / "state"), capture_output=True, text=True, timeout=900,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert not out.get("is_error"), out.get("text")
    findings = out["structured"]["findings"]
    assert not [f for f in findings if f["code"] == decisive_code], out["text"]
    assert not [f for f in findings if f["severity"] == "error"], out["text"]
    assert out["structured"]["healthy"] is True, out["text"]  # quiet: not even a warning
    print(f"\n{case} fixed: healthy={out['structured']['healthy']}, findings {[f['code'] for f in findings]}")
