"""A library upgrade that changes an op's default: bisect_versions finds the version, offers trace_diff on
the two environments it built, and trace_diff names the operation whose argument changed, with the
user's line and the library's.

Offline by construction, as tests/test_bisect_versions.py: hand-written wheels of a small package
`tsops` (2.0 changes its activation's default from exact GELU to the tanh approximation), uv
environments built with this interpreter and reusing its torch.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.bisect.wheels import build_wheel

OPS = '''
import torch.nn.functional as F


def act(x, approximate="{default}"):
    """The activation of the models built with tsops."""
    return F.gelu(x, approximate=approximate)
'''
MODEL = """
import torch
import tsops
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x):
        return self.fc2(tsops.act(self.fc1(x)))


torch.manual_seed(0)
model = MLP()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 4)
for step in range(10):
    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
# The reproducer the person wrote: the activation must stay the exact GELU the model was trained with.
CHECK = "import sys, torch, tsops; x = torch.linspace(-3, 3, 13); sys.exit(0 if torch.allclose(tsops.act(x), torch.nn.functional.gelu(x)) else 1)"


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    wheels = tmp_path / "wheels"
    for version, default in (("1.0", "none"), ("1.1", "none"), ("2.0", "tanh"), ("2.1", "tanh")):
        build_wheel(
            wheels,
            "tsops",
            version,
            {"tsops/__init__.py": textwrap.dedent(OPS.format(default=default)).lstrip()},
        )
    yield wheels


@pytest.mark.anyio
async def test_bisect_versions_then_trace_diff_names_the_changed_default(
    tmp_path: Path, offline: Path
) -> None:
    ws = tmp_path / "proj"
    ws.mkdir()
    (ws / "train.py").write_text(textwrap.dedent(MODEL).lstrip())
    server, _ = build_server(ServerConfig(workspaces=[ws], call_wait_s=900))
    async with Client(server) as client:
        bisect = await client.call_tool(
            "bisect_versions",
            {
                "package": "tsops",
                "versions": ["1.0", "1.1", "2.0", "2.1"],
                "command": f"python -c '{CHECK}'",
                "python": sys.executable,
                "reuse_packages": ["torch"],
                "find_links": [str(offline)],
                "no_index": True,
            },
        )
        assert not bisect.is_error, bisect.content[0].text
        job = bisect.structured_content
        assert job is not None and job["first_bad_version"] == "2.0" and job["last_good_version"] == "1.1"
        offer = job["trace_diff"]
        args = offer["arguments"]
        assert "tsops==1.1 and tsops==2.0" in offer["why"]
        envs = ws / ".trainsleuth" / "envs" / "versions"
        assert Path(args["python"]).parent.parent.parent == envs and Path(args["python_b"]).is_file()
        assert "next: trace_diff(" in bisect.content[0].text
        # The bisect's command is a unit check; the person traces the training itself in both environments.
        result = await client.call_tool("trace_diff", {**args, "command": "python train.py", "steps": 2})
    assert not result.is_error, result.content[0].text
    out = result.structured_content
    assert out is not None and out["verdict"] == "differs"
    first = out["first_difference"]
    assert first["code"] == "call_args" and first["what"] == "F.gelu in model" and first["before_training"]
    assert {"arg": "approximate", "a": "none", "b": "tanh"} in first["changes"]
    line = (
        textwrap.dedent(MODEL).lstrip().splitlines().index("        return self.fc2(tsops.act(self.fc1(x)))")
        + 1
    )
    library = OPS.lstrip().splitlines().index("    return F.gelu(x, approximate=approximate)") + 1
    assert first["site_a"] == f"train.py:{line} in forward (via tsops/__init__.py:{library} in act)"
    assert first["site_b"] == first["site_a"]
    assert [v["python"] for v in out["variants"]] == [args["python"], args["python_b"]]
