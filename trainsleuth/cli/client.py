"""`trainsleuth client call|run|tools|describe`: a scripted MCP client for CI.

Exit codes: 0 ok, 1 an expectation failed, 2 usage, 3 server or tool error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from trainsleuth.cli._options import add_fail_on, fail_level

EPILOG = """\
exit codes:
  0  ok
  1  an expectation failed (e.g. fail_on found an event at or above the level)
  2  usage: bad arguments or an invalid playbook
  3  the server or a tool failed (cannot start or reach the server, a tool answered isError)

examples:
  trainsleuth client call analyze_training_log --arg path=train.log --json
  trainsleuth client call probe_gradients --arg entrypoint=train.py:make --arg steps=3
  trainsleuth client tools --url http://127.0.0.1:8765/mcp   # finds the token the server stored
  trainsleuth client describe bisect_versions     # every argument, its bounds, and an example call
  trainsleuth client call get_job --arg job_id=job-1 --arg wait_s=300   # waits the whole 300 s
  trainsleuth client run ci/trainsleuth.yaml
  trainsleuth client stop                         # stop the server kept for this workspace

call, tools and describe keep one server per workspace running between calls (it exits after 10 idle
minutes); --no-keep or TRAINSLEUTH_KEEP_SERVER=0 starts one for the call only.
"""


def _add_server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server",
        default=None,
        metavar="COMMAND",
        help="server command line to start over stdio (default: this installation's `trainsleuth serve`)",
    )
    p.add_argument(
        "--workspace", default=None, metavar="PATH", help="workspace for the default server (default: cwd)"
    )
    p.add_argument("--url", default=None, help="connect to a streamable-HTTP server at this URL instead")
    p.add_argument(
        "--token",
        default=None,
        help="bearer token for --url (discouraged: `ps` shows it; default: TRAINSLEUTH_TOKEN, else the token "
        "file the server made for that address)",
    )
    p.add_argument(
        "--token-file", default=None, metavar="FILE", help="read the bearer token for --url from FILE"
    )
    p.add_argument(
        "--no-keep",
        action="store_true",
        help="start a server for this call only (default: the workspace's server is kept running between "
        "calls and exits after 10 idle minutes; env TRAINSLEUTH_KEEP_SERVER=0 does the same)",
    )


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "client",
        help="scripted MCP client for CI",
        description="Scripted MCP client for CI: call one tool, or run a playbook of calls with expectations.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    csub = p.add_subparsers(dest="client_command", metavar="ACTION")
    call = csub.add_parser(
        "call",
        help="call one tool and print its result",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    call.add_argument("tool", help="tool name, e.g. analyze_training_log")
    call.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="tool argument (repeatable); VALUE is read as JSON when valid (3, true, [1,2]), else as text",
    )
    call.add_argument("--args-json", default=None, metavar="JSON", help="all arguments as one JSON object")
    call.add_argument(
        "--json", action="store_true", help="print one JSON object (is_error, structured, text)"
    )
    call.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="when the tool hands back a running job, follow it with get_job for up to SECONDS and print its "
        "result (default: get_job's own wait_s, any length; 0 with background=true; else 300)",
    )
    add_fail_on(call)
    _add_server_options(call)
    call.set_defaults(func=run_call)
    run = csub.add_parser(
        "run", help="run a YAML playbook of calls with expectations", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    run.add_argument("playbook", help="playbook YAML file (format: docs/clients.md)")
    run.add_argument("--json", action="store_true", help="print one JSON object with every step")
    run.add_argument("--url", default=None, help="run against this streamable-HTTP server instead")
    run.add_argument("--token", default=None, help="bearer token for --url (discouraged: `ps` shows it)")
    run.add_argument("--token-file", default=None, metavar="FILE", help="read the bearer token from FILE")
    run.add_argument(
        "--workspace",
        default=None,
        metavar="PATH",
        help="the workspace the default server serves and write/shell steps act in (default: the playbook's folder)",
    )
    run.set_defaults(func=run_playbook_cmd)
    tools = csub.add_parser("tools", help="list the server's tools")
    tools.add_argument(
        "--json", action="store_true", help="print every tool with its input schema and annotations"
    )
    _add_server_options(tools)
    tools.set_defaults(func=run_tools)
    describe = csub.add_parser(
        "describe",
        help="one tool's arguments (type, bounds, enum values, defaults) and an example call",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    describe.add_argument(
        "tool", nargs="+", help="tool name(s), e.g. bisect_versions (several at once: fewer calls)"
    )
    describe.add_argument("--json", action="store_true", help="print the tool definition and an example")
    _add_server_options(describe)
    describe.set_defaults(func=run_describe)
    stop = csub.add_parser("stop", help="stop the server kept for this workspace (--all: every workspace)")
    stop.add_argument("--workspace", default=None, metavar="PATH", help="the workspace (default: cwd)")
    stop.add_argument("--all", action="store_true", help="every kept server of this user")
    stop.set_defaults(func=run_stop)
    p.set_defaults(func=_usage, _parser=p)


def _usage(args: argparse.Namespace) -> int:
    args._parser.print_help(sys.stderr)
    return 2


def _target(args: argparse.Namespace) -> Any:
    import shlex

    from trainsleuth.clients.scripted import ServerTarget, UsageError, default_server_command

    token = None
    if args.url:
        token = url_token(args.url, args.token, getattr(args, "token_file", None))
    if args.url:
        if args.server:
            raise UsageError("give either --url or --server, not both")
        return ServerTarget(url=args.url, token=token)
    if args.server:
        cmd = shlex.split(args.server)
        if cmd and cmd[0] == "trainsleuth":
            cmd = default_server_command()[:-1] + cmd[1:]
        return ServerTarget(command=cmd)
    workspace = Path(args.workspace).absolute() if args.workspace else Path.cwd()
    if not workspace.is_dir():
        raise UsageError(f"--workspace {args.workspace!r} is not an existing directory")
    from trainsleuth.clients.keep import wanted

    return ServerTarget(
        command=default_server_command(workspace), cwd=workspace, keep=wanted(getattr(args, "no_keep", False))
    )


def url_token(url: str, token: str | None, token_file: str | None) -> str | None:
    """The bearer token for a server URL: --token-file, --token, TRAINSLEUTH_TOKEN, else the token file
    the server made for that address (see trainsleuth/server/tokens.py)."""
    from trainsleuth.clients.scripted import UsageError
    from trainsleuth.server.tokens import TOKEN_ENV, TokenError, find_token, read_token_file

    try:
        if token_file:
            return read_token_file(Path(token_file))
        if token:
            print("trainsleuth client: warning: --token on the command line is visible to every user in `ps`; "
                  "prefer --token-file or TRAINSLEUTH_TOKEN", file=sys.stderr)  # fmt: skip
            return token
        if os.environ.get(TOKEN_ENV):
            return os.environ[TOKEN_ENV]
        return find_token(url)[0]
    except TokenError as exc:
        raise UsageError(str(exc)) from None


def _fail(prefix: str, exc: BaseException, target: Any = None) -> int:
    from trainsleuth.clients.scripted import UsageError

    if isinstance(exc, UsageError):
        print(f"trainsleuth client: {exc}", file=sys.stderr)
        return 2
    detail = _describe(exc)
    if target is not None and getattr(target, "url", None):
        detail += _http_hint(target.url, target.token)
    print(f"trainsleuth client: {prefix}: {detail}", file=sys.stderr)
    return 3


def _http_hint(url: str, token: str | None) -> str:
    """Ask the URL directly, to say why the MCP connection failed (refused, 401, 404, ...)."""
    import httpx

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        resp = httpx.post(url, json=body, headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        return f" (the URL cannot be reached: {exc}; is the server running?)"
    if resp.status_code == 401:
        from trainsleuth.server.tokens import token_path, url_address

        where = token_path(*url_address(url))
        return (
            f" (HTTP 401: missing or wrong bearer token. A server on this machine keeps its token in {where}, "
            "read by this client when it exists; else pass --token-file FILE or set TRAINSLEUTH_TOKEN)"
        )
    if resp.status_code >= 400:
        return f" (HTTP {resp.status_code} from {url}: {resp.text[:200]})"
    return ""


def _describe(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)  # an exception group from the task group
    if isinstance(inner, (list, tuple)) and inner:
        return "; ".join(_describe(e) for e in inner)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def run_call(args: argparse.Namespace) -> int:
    import time

    from trainsleuth.clients.scripted import UsageError, check_expectations, parse_arg
    from trainsleuth.clients.session import follow, open_session

    try:
        target = _target(args)
        arguments: dict[str, Any] = {}
        if args.args_json:
            try:
                loaded = json.loads(args.args_json)
            except json.JSONDecodeError as exc:
                raise UsageError(f"--args-json is not valid JSON: {exc}") from exc
            if not isinstance(loaded, dict):
                raise UsageError("--args-json must be a JSON object")
            arguments.update(loaded)
        for item in args.arg:
            key, value = parse_arg(item)
            arguments[key] = value
        if args.wait is not None and args.wait < 0:
            raise UsageError("--wait must be 0 or more seconds")
    except UsageError as exc:
        return _fail("usage", exc)
    wait_s = args.wait if args.wait is not None else _asked_wait(args.tool, arguments)
    started = time.monotonic()
    try:
        with open_session(target) as call:
            result = call(args.tool, arguments)
            if wait_s > 0 and not result.is_error:
                result = follow(call, args.tool, arguments, result, wait_s, started)
    except Exception as exc:
        return _fail(f"cannot call {args.tool} on {target.describe()}", exc, target)
    if fail_level(args.fail_on) and not result.is_error:
        result.failures = check_expectations(result, {"fail_on": args.fail_on})
    if args.json:
        print(json.dumps(result.as_json(), indent=2, default=str))
    elif result.is_error:
        print(f"trainsleuth client: {args.tool} answered with an error:\n{result.text}", file=sys.stderr)
    else:
        print(result.text)
        for failure in result.failures:
            print(f"FAIL: {failure}", file=sys.stderr)
    if result.is_error:
        return 3
    return 1 if result.failures else 0


# A shell has no client timeout: a tool that hands back a job (a reproducer run, a bisect) is followed to
# its result for this long unless --wait says otherwise, so one command gives the answer (blind runs:
# every `submit_diagnosis`/`verify_fix` otherwise cost a get_job call or two).
FOLLOW_JOBS_S = 300.0


def _asked_wait(tool: str, arguments: dict[str, Any]) -> float:
    """get_job's own wait_s, however long (the server waits at most 40 s a call; the rest is polled);
    for any other tool FOLLOW_JOBS_S, unless the call asked for a background job."""
    if tool != "get_job":
        return 0.0 if arguments.get("background") is True else FOLLOW_JOBS_S
    try:
        return max(0.0, float(arguments.get("wait_s") or 0))
    except (TypeError, ValueError):
        return 0.0  # the server refuses it with the reason


def run_stop(args: argparse.Namespace) -> int:
    from trainsleuth.clients.keep import stop

    workspace = None if args.all else (Path(args.workspace).absolute() if args.workspace else Path.cwd())
    pids = stop(workspace)
    where = "every workspace" if workspace is None else str(workspace)
    print(
        f"stopped {len(pids)} kept server(s) of {where}"
        + (f": pid {', '.join(map(str, pids))}" if pids else "")
    )
    return 0


def run_tools(args: argparse.Namespace) -> int:
    from trainsleuth.clients.scripted import UsageError
    from trainsleuth.clients.session import list_tools

    try:
        target = _target(args)
    except UsageError as exc:
        return _fail("usage", exc)
    try:
        tools = list_tools(target)
    except Exception as exc:
        return _fail(f"cannot list tools on {target.describe()}", exc, target)
    if args.json:
        print(json.dumps(tools, indent=2))
    else:
        for t in tools:
            desc = t.get("description") or ""
            print(f"{t['name']}: {desc.splitlines()[0] if desc else ''}")
            print(f"    args: {_argument_names(t.get('inputSchema') or {})}")
        print(
            "(* = required; `trainsleuth client describe TOOL [TOOL...]` gives types, bounds and an example call)"
        )
    return 0


def _argument_names(schema: dict[str, Any]) -> str:
    """One line of argument names, required first and starred, so most calls need no describe."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    names = [f"{n}*" for n in props if n in required] + [n for n in props if n not in required]
    return ", ".join(names) or "(none)"


def run_describe(args: argparse.Namespace) -> int:
    from trainsleuth.clients.schema_help import describe_tool, example_arguments
    from trainsleuth.clients.scripted import UsageError
    from trainsleuth.clients.session import list_tools
    from trainsleuth.tools.names import closest

    try:
        target = _target(args)
    except UsageError as exc:
        return _fail("usage", exc)
    try:
        tools = {t["name"]: t for t in list_tools(target)}
    except Exception as exc:
        return _fail(f"cannot list tools on {target.describe()}", exc, target)
    unknown = [name for name in args.tool if name not in tools]
    if unknown:
        for name in unknown:
            hint = closest(name, sorted(tools))
            did = f"; did you mean {hint!r}?" if hint else ""
            print(
                f"trainsleuth client: no tool {name!r}{did} (trainsleuth client tools lists them)",
                file=sys.stderr,
            )
        return 2
    chosen = [tools[name] for name in args.tool]
    if args.json:
        out = [
            {**t, "example_arguments": example_arguments(t.get("inputSchema") or {}, t["name"])}
            for t in chosen
        ]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
    else:
        print(
            "\n\n".join(
                describe_tool(
                    t["name"],
                    t.get("description") or "",
                    t.get("inputSchema") or {},
                    t.get("annotations") or {},
                )
                for t in chosen
            )
        )
    return 0


def run_playbook_cmd(args: argparse.Namespace) -> int:
    import anyio

    from trainsleuth.clients.scripted import StepResult, UsageError, load_playbook, run_playbook

    try:
        token = url_token(args.url, args.token, args.token_file) if args.url else None
        workspace = Path(args.workspace) if args.workspace else None
        playbook = load_playbook(Path(args.playbook), url=args.url, token=token, workspace=workspace)
    except UsageError as exc:
        return _fail("usage", exc)

    def report(step: StepResult) -> None:
        if args.json:
            return
        status = "ERROR" if step.is_error and step.failures else ("FAIL" if step.failures else "ok")
        target = step.target if len(step.target) <= 80 else step.target[:77] + "..."
        print(f"[{status}] {step.name} ({step.kind} {target}, {step.seconds:.1f}s)", flush=True)
        for failure in step.failures:
            print(f"    - {failure}")

    try:
        code, results = anyio.run(lambda: run_playbook(playbook, on_step=report))
    except Exception as exc:
        return _fail(f"playbook {args.playbook} against {playbook.target.describe()}", exc, playbook.target)
    if args.json:
        print(json.dumps({"exit_code": code, "steps": [r.as_json() for r in results]}, indent=2, default=str))
    else:
        failed = sum(1 for r in results if r.failures)
        print(
            f"{len(results)} step(s) run of {len(playbook.steps)}, {failed} with failures; exit code {code}"
        )
    return code
