"""Loopback HTTP is not private: `serve --transport http` requires a bearer token by default.

Attacks: another local process calls a tool that runs commands (bisect_commits) without the token;
reads the token from `ps`; uses a token file others can read. Defences: the token is made per server
address, kept in a 0600 file in a 0700 per-user folder, never needed on argv; `--no-auth` is explicit
and warns; our own client and installer find the token without flags.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from test_server_http import TOKEN_DIRS, bearer, free_port, http_server, post

from trainsleuth.server.tokens import TOKEN_DIR_ENV, token_path

TRAINSLEUTH = str(Path(sys.executable).parent / "trainsleuth")

BISECT_CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {
        "name": "bisect_commits",
        "arguments": {"repo": ".", "good": "HEAD", "bad": "HEAD", "command": "touch /tmp/pwned-by-bisect"},
    },
}


def test_default_server_refuses_callers_without_the_token(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with http_server(ws) as port:
        status, body = post(port, {})
        assert status == 401 and "bearer token" in body
        status, _ = post(port, {}, BISECT_CALL)  # the attack: run a shell command through bisect
        assert status == 401
        status, _ = post(port, {"Authorization": "Bearer guessed"}, BISECT_CALL)
        assert status == 401
        status, body = post(port, bearer(port))
        assert status == 200 and "trainsleuth" in body
        # The token is in a private file, not on the server's command line.
        path = token_path("127.0.0.1", port, {TOKEN_DIR_ENV: TOKEN_DIRS[port]})
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        token = path.read_text().strip()
        assert len(token) >= 40
        for pid in os.listdir("/proc") if Path("/proc").is_dir() else []:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            assert token.encode() not in cmdline


def _serve(tmp_path: Path, *args: str, token_dir: Path) -> subprocess.CompletedProcess[str]:
    """Start a server that must refuse to start (returns at once)."""
    env = {**{k: v for k, v in os.environ.items() if k != "TRAINSLEUTH_TOKEN"}, TOKEN_DIR_ENV: str(token_dir)}
    return subprocess.run(
        [TRAINSLEUTH, "serve", "--transport", "http", "--port", str(free_port()), "--workspace", str(tmp_path),
         *args],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    loose = tmp_path / "token"
    loose.write_text("s3cret-but-readable\n")
    loose.chmod(0o644)
    proc = _serve(tmp_path, "--token-file", str(loose), token_dir=tmp_path / "tokens")
    assert proc.returncode == 2 and "chmod 600" in proc.stderr
    contradicting = _serve(tmp_path, "--no-auth", "--token-file", str(loose), token_dir=tmp_path / "tokens")
    assert contradicting.returncode == 2 and "contradicts" in contradicting.stderr


def test_argv_token_warns_and_no_auth_is_explicit(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with http_server(ws, "--token", "on-the-command-line") as port:
        status, _ = post(port, {"Authorization": "Bearer on-the-command-line"})
        assert status == 200
    with http_server(ws, "--no-auth") as port:
        status, body = post(port, {})
        assert status == 200, body


def test_token_is_kept_across_restarts_and_found_by_the_client(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.log").write_text("step 1 loss 2.0\nstep 2 loss 1.9\n")
    with http_server(ws) as port:
        first = bearer(port)
        token_dir = TOKEN_DIRS[port]
        env = {**{k: v for k, v in os.environ.items() if k != "TRAINSLEUTH_TOKEN"}, TOKEN_DIR_ENV: token_dir}
        url = f"http://127.0.0.1:{port}/mcp"
        listed = subprocess.run(
            [TRAINSLEUTH, "client", "tools", "--url", url],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert listed.returncode == 0, listed.stderr
        assert "verify_fix" in listed.stdout and "warning" not in listed.stderr
        called = subprocess.run(
            [TRAINSLEUTH, "client", "call", "analyze_training_log", "--url", url.replace("127.0.0.1", "localhost"),
             "--arg", "path=train.log", "--json"],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert called.returncode == 0, called.stderr
        assert json.loads(called.stdout)["is_error"] is False
        elsewhere = {**env, TOKEN_DIR_ENV: str(tmp_path / "no-tokens-here")}
        refused = subprocess.run(
            [TRAINSLEUTH, "client", "tools", "--url", url],
            capture_output=True,
            text=True,
            timeout=120,
            env=elsewhere,
        )
        assert refused.returncode == 3 and "401" in refused.stderr
    # A later server on the same address keeps the token, so client configurations stay valid.
    with http_server(ws, env={TOKEN_DIR_ENV: token_dir}, port=port) as again:
        assert bearer(again) == first
