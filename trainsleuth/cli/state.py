"""`trainsleuth approve` and `trainsleuth state`: what the person does in their own terminal.

- `trainsleuth approve` shows the decisions waiting for the person (a diagnosis, extra files of a fix,
  abandoning, starting fresh) and records the decision they type. It refuses to run without a terminal
  on stdin and stdout: an assistant's shell tool is not one.
- `trainsleuth state show` says where a workspace's state lives, whether its seal holds, its settings,
  open investigations, pending requests and leftover git refs.
- `trainsleuth state accept` re-seals state that was altered outside trainsleuth, after the person has
  looked at it (terminal only); with the state gone, it lets a fresh one start.
- `trainsleuth state set approval elicitation-only|any`, `trainsleuth state set rca-dir PATH`.
- `trainsleuth state refs [--prune]` lists (and removes) git refs under refs/trainsleuth/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import os
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_USAGE, EXIT_ERROR = 0, 2, 3


def add_parser(sub: Any) -> None:
    ap = sub.add_parser(
        "approve",
        help="decide, in your own terminal, what trainsleuth asks of you (approve a diagnosis, ...)",
        description="Show the decisions trainsleuth is waiting for in a workspace and record yours. Runs only "
        "in a terminal you type into (never from an assistant's shell tool).",
    )
    ap.add_argument(
        "--workspace", default=None, metavar="PATH", help="the workspace (default: current folder)"
    )
    ap.set_defaults(func=run_approve)

    sp = sub.add_parser("state", help="where a workspace's trainsleuth state lives, and what is in it")
    ssub = sp.add_subparsers(dest="state_command", metavar="ACTION")
    for name, helptext in (
        ("show", "location, seal, settings, open investigations, pending requests, git refs"),
        ("accept", "re-seal state altered outside trainsleuth, after you looked at it (terminal only)"),
    ):
        p = ssub.add_parser(name, help=helptext)
        p.add_argument("--workspace", default=None, metavar="PATH")
        p.set_defaults(func=run_show if name == "show" else run_accept)
    ps = ssub.add_parser("set", help="a workspace setting: approval (elicitation-only|any), rca-dir (PATH)")
    ps.add_argument("key", choices=["approval", "rca-dir"])
    ps.add_argument("value")
    ps.add_argument("--workspace", default=None, metavar="PATH")
    ps.set_defaults(func=run_set)
    pr = ssub.add_parser("refs", help="list git refs trainsleuth keeps under refs/trainsleuth/")
    pr.add_argument(
        "--prune", action="store_true", help="remove those of investigations without an active fix"
    )
    pr.add_argument("--workspace", default=None, metavar="PATH")
    pr.set_defaults(func=run_refs)
    sp.set_defaults(func=lambda args: (sp.print_help(sys.stderr), EXIT_USAGE)[1])


def _workspace(args: argparse.Namespace) -> Path:
    return Path(args.workspace or os.getcwd()).resolve()


def _in_a_terminal(what: str) -> bool:
    if sys.stdin.isatty() and sys.stdout.isatty():
        return True
    print(
        f"trainsleuth {what}: this must be run by the person, in their own terminal (stdin and stdout are not a "
        "terminal here, as in an assistant's shell tool). Nothing was changed.",
        file=sys.stderr,
    )
    return False


def _terminal_channel() -> str:
    from trainsleuth.protocol.approvals import launcher

    try:
        tty = os.ttyname(sys.stdin.fileno())
    except OSError:
        tty = "a terminal"
    return f"`trainsleuth approve` in {tty} (pid {os.getpid()}, started by: {launcher()})"


def _protocol(ws: Path) -> Any:
    from trainsleuth.protocol.machine import Protocol
    from trainsleuth.state.store import Store, default_state_path

    db = default_state_path(ws)
    if not db.exists():
        return None
    return Protocol(Store(db, workspace=ws))


def run_approve(args: argparse.Namespace) -> int:
    from trainsleuth.protocol.ledger import ProtocolError

    ws = _workspace(args)
    if not _in_a_terminal("approve"):
        return EXIT_USAGE
    try:
        proto = _protocol(ws)
        requests = proto.pending_requests() if proto is not None else []
    except ProtocolError as exc:
        print(f"trainsleuth approve: {exc.message}\nNext: {exc.next_step}", file=sys.stderr)
        return EXIT_ERROR
    if not requests:
        print(f"Nothing waits for your decision in {ws}.")
        return EXIT_OK
    name = input(f"Your name [{getpass.getuser()}]: ").strip() or getpass.getuser()
    for req in requests:
        print("\n" + "=" * 72)
        print(f"Request {req.id} ({req.purpose}, investigation {req.investigation_id}):\n")
        print(req.text)
        print("=" * 72)
        answer = input("Type 'approve', 'reject', or press Enter to leave it: ").strip().lower()
        if answer not in ("approve", "reject"):
            print("Left undecided.")
            continue
        words = input("Your words (optional): ").strip() or None
        proto.decide_request(req.id, answer, name, words, _terminal_channel())
        print(f"Recorded: {answer}. Tell your assistant to carry on (it calls the same tool again).")
    return EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    from trainsleuth.protocol.gate import edit_gate_status
    from trainsleuth.protocol.snapshot import list_refs
    from trainsleuth.state import seal
    from trainsleuth.state.location import marker_path, read_marker
    from trainsleuth.state.store import default_state_path

    ws = _workspace(args)
    db = default_state_path(ws)
    marker = read_marker(ws)
    print(f"Workspace: {ws}")
    print(f"State: {db} ({'present' if db.exists() else 'absent'})")
    print(f"Signing key: {seal.key_path()} ({'present' if seal.key_path().exists() else 'absent'})")
    print(f"Marker: {marker_path(ws)} ({'present' if marker is not None else 'absent'})")
    status = edit_gate_status(ws)
    print(f"Edit gate: {'open' if status.allowed else 'closed'}: {status.reason}")
    if db.exists():
        from trainsleuth.protocol.ledger import ProtocolError

        try:
            proto = _protocol(ws)
            from trainsleuth.protocol.approvals import APPROVAL_POLICY, RCA_DIR

            print(f"Approval policy: {proto.setting(APPROVAL_POLICY) or 'any'}")
            print(f"RCA folder: {proto.setting(RCA_DIR) or '.trainsleuth/rca (default)'}")
            for inv in proto.list_all(include_closed=False):
                print(f"Open: {inv.id} [{inv.phase}] {inv.symptom[:100]}")
            for req in proto.pending_requests():
                print(f"Waiting for you: {req.id} ({req.purpose} of {req.target}); run `trainsleuth approve`")
        except ProtocolError as exc:
            print(f"The state cannot be used: {exc.message}")
    refs = list_refs(ws)
    print(
        f"Git refs under refs/trainsleuth/: {len(refs)}"
        + (" (trainsleuth state refs --prune)" if refs else "")
    )
    return EXIT_OK


def run_accept(args: argparse.Namespace) -> int:
    from trainsleuth.state import seal
    from trainsleuth.state.location import marker_path, read_marker
    from trainsleuth.state.store import Store, default_state_path

    ws = _workspace(args)
    if not _in_a_terminal("state accept"):
        return EXIT_USAGE
    db = default_state_path(ws)
    if not db.exists():
        if read_marker(ws) is None:
            print("There is no trainsleuth state for this workspace, and no marker: nothing to accept.")
            return EXIT_OK
        print(f"The state {db} is gone; the workspace's marker says investigations were kept there.")
        if input("Type 'start fresh' to let trainsleuth start a new, empty state: ").strip() != "start fresh":
            print("Nothing changed.")
            return EXIT_OK
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        marker_path(ws).rename(marker_path(ws).with_name(f"state.json.removed-{stamp}"))
        print("Done: the next trainsleuth server starts a fresh state (the old marker is kept beside it).")
        return EXIT_OK
    store = Store(db, workspace=ws)
    key = seal.load_key(create=True)
    assert key is not None
    with store.connect() as conn:
        problem = seal.problem(conn, key)
    if problem is None:
        print("The state's seal holds: nothing to accept.")
        return EXIT_OK
    print(f"The state {db} was altered outside trainsleuth: {problem}.")
    print("Accepting seals it as it is now, including whatever was changed.")
    if input("Type 'accept' to accept it: ").strip() != "accept":
        print("Nothing changed.")
        return EXIT_OK
    now = dt.datetime.now(dt.timezone.utc).timestamp()
    with store.transaction() as conn:
        for row in conn.execute(
            "SELECT id, phase FROM investigations WHERE phase NOT IN ('closed', 'abandoned')"
        ):
            conn.execute(
                "INSERT INTO events(investigation_id, at, kind, phase, summary, data) VALUES(?,?,?,?,?,?)",
                (row["id"], now, "state_accepted", row["phase"],
                 f"the person accepted state altered outside trainsleuth ({problem}) via {_terminal_channel()}", "{}"),
            )  # fmt: skip
        seal.write(conn, key)
    print("Accepted and sealed.")
    return EXIT_OK


def run_set(args: argparse.Namespace) -> int:
    from trainsleuth.protocol.approvals import APPROVAL_POLICY, RCA_DIR
    from trainsleuth.protocol.ledger import ProtocolError
    from trainsleuth.protocol.machine import Protocol
    from trainsleuth.state.store import Store, default_state_path

    ws = _workspace(args)
    proto = Protocol(Store(default_state_path(ws), workspace=ws))
    try:
        if args.key == "approval":
            if args.value not in ("elicitation-only", "any"):
                print("trainsleuth state set approval: elicitation-only or any", file=sys.stderr)
                return EXIT_USAGE
            if args.value == "any":
                # Loosening the policy is the person's call, in their terminal.
                if not _in_a_terminal("state set approval any"):
                    return EXIT_USAGE
                if input("Type 'any' to accept approvals without a dialog again: ").strip() != "any":
                    print("Nothing changed.")
                    return EXIT_OK
            proto.set_setting(APPROVAL_POLICY, args.value.replace("-", "_"))
        else:
            proto.set_setting(RCA_DIR, args.value)
    except ProtocolError as exc:
        print(f"trainsleuth state set: {exc.message}", file=sys.stderr)
        return EXIT_ERROR
    print(f"{args.key} = {args.value}")
    return EXIT_OK


def run_refs(args: argparse.Namespace) -> int:
    from trainsleuth.protocol.snapshot import delete_refs, list_refs

    ws = _workspace(args)
    refs = list_refs(ws)
    if not refs:
        print("No refs under refs/trainsleuth/.")
        return EXIT_OK
    active: set[str] = set()
    proto = _protocol(ws)
    if proto is not None:
        for inv in proto.list_all(include_closed=False):
            if inv.phase in ("fixing", "approved", "diagnosis", "investigating", "hypotheses", "halted"):
                active.add(inv.id)
    for ref in refs:
        inv_id = ref.removeprefix("refs/trainsleuth/").split("/", 1)[0]
        keep = inv_id in active
        print(f"{ref}{' (open investigation: kept)' if keep else ''}")
        if args.prune and not keep:
            delete_refs(ws, ref.removeprefix("refs/trainsleuth/"))
    return EXIT_OK
