"""diff_checkpoints over a real MCP client: real torch.save and safetensors files, every kind of mismatch,
and a pickle that would run code (it must be refused without running)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from mcp import Client
from safetensors.torch import save_file
from torch import nn

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.checkpoints.diff import diff_checkpoints


def _state_dict() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    return {k: v.clone() for k, v in model.state_dict().items()}


MODEL_FILE = """
import torch
from torch import nn

def entry():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    return {"model": model, "batch": torch.randn(4, 4)}
"""


class RunsCode:
    """Unpickling this would create a marker file: exactly what must never happen."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


async def _diff(workspace: Path, args: dict[str, Any]) -> Any:
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        return await client.call_tool("diff_checkpoints", args)


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return dict(result.structured_content)


@pytest.mark.anyio
async def test_identical_and_value_differences(workspace: Path) -> None:
    sd = _state_dict()
    torch.save(sd, workspace / "a.pt")
    changed = {k: v.clone() for k, v in sd.items()}
    changed["0.weight"] += 0.1
    changed["2.bias"] += 1e-7
    torch.save(changed, workspace / "b.pt")
    data = _ok(await _diff(workspace, {"a": "a.pt", "b": "b.pt", "rtol": 1e-4}))
    assert data["identical"] is False
    assert data["matched"] == len(sd) and not data["only_in_a"] and not data["only_in_b"]
    assert data["n_value_differences"] == 1
    [diff] = data["value_differences"]
    assert diff["a"] == "0.weight" and diff["max_abs_diff"] == pytest.approx(0.1, rel=1e-5)
    assert data["values_close"] == 1  # 2.bias moved by 1e-7, inside rtol


@pytest.mark.anyio
async def test_missing_unexpected_shape_and_dtype(workspace: Path) -> None:
    sd = _state_dict()
    torch.save(sd, workspace / "a.pt")
    other = dict(sd)
    del other["1.running_var"]
    other["extra.weight"] = torch.ones(2)
    other["2.weight"] = torch.zeros(3, 8)
    other["0.bias"] = sd["0.bias"].half()
    torch.save(other, workspace / "b.pt")
    data = _ok(await _diff(workspace, {"a": "a.pt", "b": "b.pt"}))
    assert data["only_in_a"] == ["1.running_var"]
    assert data["only_in_b"] == ["extra.weight"]
    assert data["shape_mismatches"] == [
        {"a": "2.weight", "b": "2.weight", "shape_a": [2, 8], "shape_b": [3, 8]}
    ]
    assert data["dtype_mismatches"] == [
        {"a": "0.bias", "b": "0.bias", "dtype_a": "float32", "dtype_b": "float16"}
    ]
    assert data["prefix_notes"] == []


@pytest.mark.anyio
async def test_prefixes_are_explained(workspace: Path) -> None:
    sd = _state_dict()
    torch.save(sd, workspace / "plain.pt")
    torch.save({f"module.{k}": v for k, v in sd.items()}, workspace / "ddp.pt")
    torch.save({"model": sd, "epoch": 3}, workspace / "nested.pt")
    torch.save({f"_orig_mod.{k}": v for k, v in sd.items()}, workspace / "compiled.pt")
    ddp = _ok(await _diff(workspace, {"a": "ddp.pt", "b": "plain.pt"}))
    [note] = ddp["prefix_notes"]
    assert note["prefix"] == "module." and note["side"] == "a" and "DistributedDataParallel" in note["cause"]
    assert "consume_prefix_in_state_dict_if_present" in note["fix"]
    assert ddp["matched"] == len(sd) and ddp["values_identical"] == len(sd)
    # a nested {'model': sd} checkpoint against a torch.compile'd model's state dict: both explained
    both = _ok(await _diff(workspace, {"a": "nested.pt", "b": "compiled.pt"}))
    assert both["container_a"] == "nested checkpoint, weights at ['model']; also epoch: 3"
    [note] = both["prefix_notes"]
    assert note["prefix"] == "_orig_mod." and note["side"] == "b" and note["cause"] == "torch.compile"
    assert both["matched"] == len(sd) and both["values_identical"] == len(sd)
    assert both["non_tensor_differences"] == {"epoch": ["3", None]}


def test_fsdp_flat_parameters_are_explained() -> None:
    from trainsleuth.tools.runners._ts_dist_ckpt import match_keys

    plain = {k: (list(v.shape), "float32") for k, v in _state_dict().items()}
    flat = {"_fsdp_wrapped_module._flat_param": ([120], "float32")}
    wrapped = {f"_fsdp_wrapped_module.{k}": v for k, v in plain.items()}
    res = match_keys(flat, plain)
    [note] = res["prefix_notes"]
    assert note["cause"] == "FSDP flat parameters" and "FULL_STATE_DICT" in note["fix"]
    assert res["pairs"] == [] and res["only_in_b"] == list(plain)
    res = match_keys(wrapped, plain)
    assert [n["prefix"] for n in res["prefix_notes"]] == ["_fsdp_wrapped_module."]
    assert len(res["pairs"]) == len(plain) and not res["only_in_a"]


@pytest.mark.anyio
async def test_checkpoint_against_an_entrypoint_model(workspace: Path) -> None:
    (workspace / "model.py").write_text(MODEL_FILE)
    sd = _state_dict()
    partial = {f"module.{k}": v for k, v in sd.items() if k != "2.bias"}
    torch.save(partial, workspace / "ckpt.pt")
    result = await _diff(workspace, {"a": "ckpt.pt", "entrypoint": "model.py:entry"})
    data = _ok(result)
    assert "missing from the checkpoint" in result.content[0].text
    assert data["b_is_model"] is True
    assert data["only_in_b"] == ["2.bias"]  # what load_state_dict(strict=True) calls missing
    assert data["prefix_notes"][0]["prefix"] == "module."
    assert data["values_identical"] == len(sd) - 1


@pytest.mark.anyio
async def test_safetensors_are_compared_without_torch_in_the_server(workspace: Path) -> None:
    sd = _state_dict()
    save_file({k: v.contiguous() for k, v in sd.items()}, str(workspace / "a.safetensors"))
    bf16 = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in sd.items()}
    save_file(bf16, str(workspace / "b.safetensors"))
    torch.save(sd, workspace / "a.pt")

    def no_interpreter() -> Path:
        raise AssertionError("two safetensors files must not need the user's interpreter")

    report = diff_checkpoints(
        workspace / "a.safetensors", workspace / "b.safetensors", python=no_interpreter, cwd=workspace
    )
    assert report.kind_a == report.kind_b == "safetensors"
    floats = [k for k, v in sd.items() if v.is_floating_point()]
    assert {m["a"] for m in report.dtype_mismatches} == set(floats)
    assert report.n_value_differences >= 2  # the Linear weights do not survive bf16 exactly
    assert {v.a for v in report.value_differences} <= set(floats)
    worst = report.value_differences[0]
    assert 0 < float(worst.rel_diff or 0) < 0.01  # bf16 rounding, decoded from raw bits
    mixed = _ok(await _diff(workspace, {"a": "a.safetensors", "b": "a.pt"}))
    assert mixed["kind_a"] == "safetensors" and mixed["kind_b"] == "torch" and mixed["identical"] is True


@pytest.mark.anyio
async def test_pickle_that_would_run_code_is_refused(workspace: Path) -> None:
    marker = workspace / "PWNED"
    torch.save({"w": torch.ones(2), "payload": RunsCode(marker)}, workspace / "evil.pt")
    with (workspace / "evil.pkl").open("wb") as fh:
        pickle.dump({"w": 1, "payload": RunsCode(marker)}, fh)
    torch.save(_state_dict(), workspace / "good.pt")
    for name in ("evil.pt", "evil.pkl"):
        result = await _diff(workspace, {"a": name, "b": "good.pt"})
        assert result.is_error, name
        text = result.content[0].text
        assert "refused" in text and "nothing from the file was executed" in text
        assert "Next step" in text
    assert not marker.exists()


@pytest.mark.anyio
async def test_bad_inputs(workspace: Path, tmp_path: Path) -> None:
    torch.save(_state_dict(), workspace / "a.pt")
    (workspace / "notes.txt").write_text("not a checkpoint")
    (tmp_path / "outside.pt").write_bytes((workspace / "a.pt").read_bytes())
    r = await _diff(workspace, {"a": "a.pt"})
    assert r.is_error and "exactly one of b" in r.content[0].text
    (workspace / "m.py").write_text(MODEL_FILE)
    r = await _diff(workspace, {"a": "a.pt", "b": "a.pt", "entrypoint": "m.py:entry"})
    assert r.is_error and "exactly one of b" in r.content[0].text
    # A checkpoint outside the workspace is only read (weights_only): allowed, and the result says so.
    r = await _diff(workspace, {"a": str(tmp_path / "outside.pt"), "b": "a.pt"})
    assert not r.is_error and "Read-only input outside the workspace: a=" in r.content[0].text
    # Model code outside the workspace would run: refused.
    (tmp_path / "m.py").write_text(MODEL_FILE)
    r = await _diff(workspace, {"a": "a.pt", "entrypoint": f"{tmp_path / 'm.py'}:entry"})
    assert r.is_error and "outside the workspace" in r.content[0].text
    r = await _diff(workspace, {"a": "missing.pt", "b": "a.pt"})
    assert r.is_error and "does not exist" in r.content[0].text
    r = await _diff(workspace, {"a": "notes.txt", "b": "a.pt"})
    assert r.is_error and "neither a torch.save file nor a safetensors file" in r.content[0].text
    (workspace / "empty_folder").mkdir()
    r = await _diff(workspace, {"a": "empty_folder", "b": "a.pt"})
    assert r.is_error and "folder without model weights" in r.content[0].text


@pytest.mark.anyio
async def test_result_is_stored_as_evidence_on_an_investigation(workspace: Path) -> None:
    sd = _state_dict()
    save_file({k: v.contiguous() for k, v in sd.items()}, str(workspace / "a.safetensors"))
    save_file({f"module.{k}": v.contiguous() for k, v in sd.items()}, str(workspace / "b.safetensors"))
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    async with Client(server) as client:
        started = await client.call_tool("start_investigation", {"symptom": "resumed run diverges at once"})
        assert not started.is_error, started.content[0].text
        inv = started.structured_content["investigation_id"]
        result = await client.call_tool(
            "diff_checkpoints", {"a": "a.safetensors", "b": "b.safetensors", "investigation_id": inv}
        )
        data = _ok(result)
        assert data["evidence_id"]
        assert f"Stored as evidence {data['evidence_id']}." in result.content[0].text
        assert data["prefix_notes"][0]["prefix"] == "module."
        timeline = await client.call_tool("get_investigation", {"investigation_id": inv})
        assert data["evidence_id"] in timeline.content[0].text or data["evidence_id"] in str(
            timeline.structured_content
        )


@pytest.mark.anyio
async def test_nested_checkpoint_with_optimizer_against_the_model(workspace: Path) -> None:
    """issue 22: {'model': DDP state dict, 'optimizer': ..., 'epoch'} against the model it should resume."""
    (workspace / "model.py").write_text(MODEL_FILE)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 4)).sum().backward()
    opt.step()
    sd = {f"module.{k}": v for k, v in model.state_dict().items()}
    torch.save({"model": sd, "optimizer": opt.state_dict(), "epoch": 3}, workspace / "resume.pt")
    result = await _diff(workspace, {"a": "resume.pt", "entrypoint": "model.py:entry"})
    data = _ok(result)
    assert data["container_a"].startswith(
        "nested checkpoint, weights at ['model']; also optimizer: 18 tensors, epoch: 3"
    )
    assert data["matched"] == 9 and data["prefix_notes"][0]["prefix"] == "module."
    strict = data["strict_false"]
    assert (strict["restored"], strict["model_tensors"], strict["missing"], strict["as_saved"]) == (
        0,
        9,
        9,
        0,
    )
    assert (
        "differ only by prefix" in strict["message"]
        and "consume_prefix_in_state_dict_if_present" in strict["message"]
    )
    assert (
        "strict=False: load_state_dict(checkpoint['model'], strict=False) would restore 0 of 9"
        in result.content[0].text
    )
    # the values are the trained ones: the model of the entrypoint is the untrained start
    assert data["n_value_differences"] >= 4


@pytest.mark.anyio
async def test_lightning_checkpoint_and_partial_restore(workspace: Path) -> None:
    (workspace / "model.py").write_text(MODEL_FILE)
    sd = _state_dict()
    lightning = {
        "state_dict": {f"net.{k}": v for k, v in sd.items()},
        "optimizer_states": [{"state": {}, "param_groups": [{"lr": 0.1, "params": [0, 1]}]}],
        "lr_schedulers": [],
        "pytorch-lightning_version": "2.4.0",
        "epoch": 1,
        "global_step": 10,
    }
    torch.save(lightning, workspace / "last.ckpt")
    data = _ok(await _diff(workspace, {"a": "last.ckpt", "entrypoint": "model.py:entry"}))
    assert data["container_a"].startswith("Lightning checkpoint, weights at ['state_dict']")
    assert data["prefix_notes"][0]["prefix"] == "net." and data["matched"] == len(sd)
    assert data["strict_false"]["restored"] == 0
    # a plain state dict with one tensor missing and one reshaped: strict=False restores the rest, and raises
    partial = dict(sd)
    del partial["2.bias"]
    partial["0.weight"] = torch.zeros(3, 4)
    torch.save(partial, workspace / "partial.pt")
    data = _ok(await _diff(workspace, {"a": "partial.pt", "entrypoint": "model.py:entry"}))
    strict = data["strict_false"]
    assert (strict["restored"], strict["missing"], strict["shape_errors"]) == (7, 1, ["0.weight"])
    assert "1 keep their initial values (2.bias)" in strict["message"]
    assert "1 shape mismatches raise even with strict=False" in strict["message"]


@pytest.mark.anyio
async def test_hugging_face_folders(workspace: Path) -> None:
    """The folder layout transformers writes: config.json, sharded safetensors with an index, or pytorch_model.bin."""
    import json

    sd = _state_dict()
    keys = list(sd)
    sharded = workspace / "hf_sharded"
    sharded.mkdir()
    (sharded / "config.json").write_text(json.dumps({"model_type": "toy"}))
    weight_map = {}
    for i, chunk in enumerate((keys[:4], keys[4:]), 1):
        name = f"model-0000{i}-of-00002.safetensors"
        save_file({k: sd[k].contiguous() for k in chunk}, str(sharded / name))
        weight_map.update({k: name for k in chunk})
    (sharded / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )
    bin_folder = workspace / "hf_bin"
    bin_folder.mkdir()
    changed = {k: v.clone() for k, v in sd.items()}
    changed["2.weight"] += 1.0
    torch.save(changed, bin_folder / "pytorch_model.bin")
    save_file({k: v.contiguous() for k, v in sd.items()}, str(workspace / "flat.safetensors"))

    def no_interpreter() -> Path:
        raise AssertionError("safetensors on both sides must not need the user's interpreter")

    report = diff_checkpoints(sharded, workspace / "flat.safetensors", python=no_interpreter, cwd=workspace)
    assert report.identical and report.kind_a == "hf_folder" and report.matched == len(sd)
    assert report.container_a == "Hugging Face folder (2 weight files, model_type toy)"
    mixed = _ok(await _diff(workspace, {"a": "hf_sharded", "b": "hf_bin"}))
    assert mixed["n_value_differences"] == 1 and mixed["value_differences"][0]["a"] == "2.weight"
    (sharded / weight_map[keys[0]]).unlink()
    broken = await _diff(workspace, {"a": "hf_sharded", "b": "hf_bin"})
    assert broken.is_error and "missing" in broken.content[0].text
