"""bisect_versions, offline by construction: hand-written wheels of `tsdemo` 1.0 ... 1.9 (1.6
introduces the bug, 1.4.1 cannot be installed) served to uv with --find-links and --no-index,
environments built with the running interpreter so uv never downloads Python."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from trainsleuth.server.app import build_server
from trainsleuth.server.context import ServerConfig
from trainsleuth.tools.bisect.common import BisectError, LocalReporter
from trainsleuth.tools.bisect.uvenv import default_python
from trainsleuth.tools.bisect.versions import prepare_version_bisect, run_version_bisect
from trainsleuth.tools.bisect.wheels import build_wheel

VERSIONS = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.4.1", "1.5", "1.6", "1.7", "1.8", "1.9"]
REPRO = "python -c 'import sys, tsdemo; sys.exit(1 if tsdemo.BUG else 0)'"


@pytest.fixture(scope="session")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wheels = tmp_path_factory.mktemp("wheels")
    for v in VERSIONS:
        minor = int(v.split(".")[1])
        code = f'VERSION = "{v}"\nBUG = {minor >= 6}\n'
        # 1.4.1 depends on a package that exists nowhere: it fails to install.
        requires = ["tsdemo-missing-dependency>=1"] if v == "1.4.1" else []
        build_wheel(wheels, "tsdemo", v, {"tsdemo/__init__.py": code}, requires=requires)
    build_wheel(wheels, "tshelper", "2.0", {"tshelper/__init__.py": "HELP = 2\n"})
    return wheels


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    yield


def bisect(
    wheels: Path, cache: Path, command: str = REPRO, versions: list[str] = VERSIONS, **kw: object
) -> dict:  # type: ignore[type-arg]
    plan = prepare_version_bisect(
        "tsdemo",
        versions,
        command,
        cwd=cache.parent,
        cache_dir=cache,
        python=default_python(),
        find_links=[str(wheels)],
        no_index=True,
        **kw,  # type: ignore[arg-type]
    )
    return run_version_bisect(plan, LocalReporter())


def test_finds_the_first_bad_version_and_reports_what_it_tried(
    tmp_path: Path, wheel_dir: Path, offline: None
) -> None:
    result = bisect(wheel_dir, tmp_path / "envs")
    assert result["first_bad_version"] == "1.6"
    assert result["last_good_version"] == "1.5"
    tried = result["versions_tried"]
    assert "1.6" in tried and "1.5" in tried and len(tried) <= 5
    # 1.4.1 sits in the middle: it was tried, could not be installed, was skipped and reported.
    assert tried[0] == "1.4.1"
    assert [f["version"] for f in result["install_failures"]] == ["1.4.1"]
    assert "tsdemo-missing-dependency" in result["install_failures"][0]["log_tail"]
    skipped = next(s for s in result["steps"] if s["version"] == "1.4.1")
    assert skipped["verdict"] == "skip" and skipped["exit_code"] is None
    assert result["runs"] == len(tried) - 1  # the uninstallable version never ran the command


def test_second_bisect_reuses_the_cached_environments(tmp_path: Path, wheel_dir: Path, offline: None) -> None:
    cache = tmp_path / "envs"
    first = bisect(wheel_dir, cache)
    second = bisect(wheel_dir, cache)
    assert second["first_bad_version"] == first["first_bad_version"] == "1.6"
    built = [s["env"] for s in first["steps"] if s["env"]["ok"]]
    reused = [s["env"] for s in second["steps"] if s["env"]["ok"]]
    assert built and not any(e["reused"] for e in built)
    assert reused and all(e["reused"] for e in reused)
    assert len(list((cache / "versions").glob("*/pyvenv.cfg"))) == len(built)


def test_environment_key_includes_base_requirements(tmp_path: Path, wheel_dir: Path, offline: None) -> None:
    cache = tmp_path / "envs"
    command = "python -c 'import sys, tsdemo, tshelper; sys.exit(1 if tsdemo.BUG else 0)'"
    with_helper = bisect(wheel_dir, cache, command, VERSIONS[6:9], requirements=["tshelper==2.0"])
    assert with_helper["first_bad_version"] == "1.6"
    assert not any(s["env"]["reused"] for s in with_helper["steps"])


def test_all_versions_failing_and_none_failing_are_told_apart(
    tmp_path: Path, wheel_dir: Path, offline: None
) -> None:
    cache = tmp_path / "envs"
    failing = bisect(wheel_dir, cache, "exit 1", ["1.0", "1.1", "1.2"])
    assert failing["all_fail"] and failing["first_bad_version"] == "1.0"
    assert "even the first version" in failing["conclusion"]
    passing = bisect(wheel_dir, cache, "true", ["1.0", "1.1", "1.2"])
    assert passing["none_fail"] and passing["first_bad_version"] is None
    assert "no version fails" in passing["conclusion"]


def test_only_uninstallable_versions_left_is_an_honest_set(
    tmp_path: Path, wheel_dir: Path, offline: None
) -> None:
    # 1.4.1 is right before the first bad version here, and it cannot be installed.
    result = bisect(wheel_dir, tmp_path / "envs", versions=["1.4", "1.4.1", "1.6"])
    assert result["first_bad_version"] is None
    assert result["possible_first_bad"] == ["1.4.1", "1.6"]


def test_no_installable_version_is_an_error_not_a_result(
    tmp_path: Path, wheel_dir: Path, offline: None
) -> None:
    """Versions that exist nowhere (a typo, a missing index): nothing was tested, and it says so."""
    with pytest.raises(BisectError, match="no version of tsdemo could be installed") as caught:
        bisect(wheel_dir, tmp_path / "envs", versions=["7.0", "7.1"])
    assert "nothing was tested" in caught.value.message and "find_links" in (caught.value.next_step or "")


@pytest.mark.parametrize(
    ("package", "versions", "message"),
    [
        ("bad name!", ["1.0", "1.1"], "not a valid package name"),
        ("tsdemo", ["1.0", "--index-url=http://evil"], "not a valid version"),
        ("tsdemo", ["1.0"], "at least two versions"),
        ("tsdemo", ["1.0", "1.0"], "duplicates"),
    ],
)
def test_bad_input_is_refused(tmp_path: Path, package: str, versions: list[str], message: str) -> None:
    with pytest.raises(BisectError, match=message):
        prepare_version_bisect(package, versions, "true", cwd=tmp_path, cache_dir=tmp_path / "envs")


def test_requirement_that_looks_like_an_option_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BisectError, match="begins with '-'"):
        prepare_version_bisect(
            "tsdemo", ["1.0", "1.1"], "true", cwd=tmp_path, cache_dir=tmp_path / "e", requirements=["--pre"]
        )


@pytest.mark.anyio
async def test_bisect_versions_over_mcp_with_progress(tmp_path: Path, wheel_dir: Path, offline: None) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # The wheel folder lies outside the workspace: an input the tool only reads, allowed and said so.
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    args = {
        "package": "tsdemo",
        "versions": VERSIONS,
        "command": REPRO,
        "python": sys.executable,
        "find_links": [str(wheel_dir)],
        "no_index": True,
    }
    async with Client(server) as client:
        result = await client.call_tool("bisect_versions", args, progress_callback=on_progress)
        assert not result.is_error, result.content[0].text
        job = result.structured_content
        assert job is not None and job["status"] == "succeeded"
        assert job["first_bad_version"] == "1.6"
        assert "could not install 1.4.1 (skipped)" in result.content[0].text
        assert (
            f"Read-only input outside the workspace: find_links[0]={wheel_dir.resolve()}"
            in result.content[0].text
        )
        assert any(m and m.startswith("step 1 of about") and "tsdemo==" in m for _, _, m in progress)
        # The environments live in the workspace's state folder and are reused by the next call.
        assert list((workspace / ".trainsleuth" / "envs" / "versions").glob("*/pyvenv.cfg"))
        again = await client.call_tool("bisect_versions", args)
        steps = again.structured_content["steps"]  # type: ignore[index]
        assert all(s["env"]["reused"] for s in steps if s["env"]["ok"])

        outside = await client.call_tool("bisect_versions", {**args, "find_links": ["/etc"]})
        assert outside.is_error and "refused even for reading: it is under /etc" in outside.content[0].text
        too_few = await client.call_tool("bisect_versions", {**args, "versions": ["1.0"]})
        assert too_few.is_error
        foreign = await client.call_tool("bisect_versions", {**args, "python": "/bin/sh"})
        assert foreign.is_error and "outside the workspace and not allowed" in foreign.content[0].text


@pytest.mark.anyio
async def test_environments_can_reuse_heavy_packages_of_the_base_interpreter(
    tmp_path: Path, wheel_dir: Path, offline: None
) -> None:
    """reuse_packages: the candidate environments see pyyaml from this interpreter's environment
    (as they would torch) without installing it; asking for a package the base lacks is refused."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server, _ = build_server(ServerConfig(workspaces=[workspace]))
    command = "python -c 'import sys, yaml, tsdemo; sys.exit(1 if tsdemo.BUG else 0)'"
    args = {
        "package": "tsdemo",
        "versions": ["1.5", "1.6"],
        "command": command,
        "python": sys.executable,
        "find_links": [str(wheel_dir)],
        "no_index": True,
        "requirements": ["pyyaml"],  # offline and not in the wheel folder: only reuse can satisfy it
        "reuse_packages": ["PyYAML"],
    }
    async with Client(server) as client:
        result = await client.call_tool("bisect_versions", args)
        assert not result.is_error, result.content[0].text
        out = result.structured_content
        assert out is not None and out["first_bad_version"] == "1.6"
        assert [r.split("==")[0] for r in out["reused_packages"]] == ["pyyaml"]
        for env in (workspace / ".trainsleuth" / "envs" / "versions").glob("*/lib/python*/site-packages"):
            assert not (env / "yaml").exists()  # seen through the base environment, never installed
            assert (env / "_trainsleuth_reuse.pth").is_file()
        missing = await client.call_tool("bisect_versions", {**args, "reuse_packages": ["no-such-pkg"]})
        assert missing.is_error and "is not installed in" in missing.content[0].text
        same = await client.call_tool("bisect_versions", {**args, "reuse_packages": ["tsdemo"]})
        assert same.is_error and "the package being bisected" in same.content[0].text
