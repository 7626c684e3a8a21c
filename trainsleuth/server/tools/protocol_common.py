"""What the protocol tools share: the Protocol for a call, step outputs, and how a person decides.

A person's decision (approve a diagnosis or an amendment, abandon, start fresh) reaches the server in
one of two ways, and the approval records which:
- **elicitation**: the client shows the person a dialog (the server renders the decision itself);
- **one-time code**: for clients without elicitation, the server shows the decision and a fresh code on
  its own stderr (and its terminal when it has one), never in a tool result; the person gives the code
  to the assistant, which passes it back. The workspace's approval policy (`elicitation_only`, kept in the
  sealed state) refuses this path for every server on the workspace.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Literal, TypeVar

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from trainsleuth.protocol.approvals import APPROVAL_POLICY, launcher
from trainsleuth.protocol.ledger import ProtocolError
from trainsleuth.protocol.machine import Protocol
from trainsleuth.protocol.models import Approval
from trainsleuth.server.context import ServerContext
from trainsleuth.server.registry import ToolCall, ToolOutput

log = logging.getLogger("trainsleuth.protocol")


def protocol_for(ctx: ServerContext) -> Protocol:
    from trainsleuth.tools.interpreter import default_interpreter
    from trainsleuth.tools.jobs import job_spans

    return Protocol(
        ctx.store,
        default_interpreter=default_interpreter(ctx.workspace),
        outside_waits=lambda since: job_spans(ctx.store, since),
    )


def proto(call: ToolCall) -> Protocol:
    """One Protocol per tool call, so notices raised during the call reach its output."""
    found = getattr(call, "_protocol", None)
    if found is None:
        found = protocol_for(call.ctx)
        call._protocol = found  # type: ignore[attr-defined]
    return found


def iid() -> Any:
    return Field()


class StepOutput(ToolOutput):
    investigation_id: str
    phase: str
    next_step: str
    notices: list[str] = Field(
        default_factory=list, description="Protocol changes that happened during this call (e.g. escalation)."
    )

    def body(self) -> str:
        return f"Next step: {self.next_step}"

    def render_text(self) -> str:
        return "".join(f"Notice: {n}\n" for n in self.notices) + self.body()


StepOutputT = TypeVar("StepOutputT", bound=StepOutput)


def step(call: ToolCall, inv_id: str) -> dict[str, Any]:
    p = proto(call)
    view = p.get(inv_id)
    return {
        "phase": view.phase,
        "next_step": next_step_now(call, inv_id, view.next_step),
        "notices": list(p.notices),
    }


def next_step_now(call: ToolCall, inv_id: str, planned: str) -> str:
    """The protocol's next step, unless a submit_diagnosis or verify_fix of the investigation still runs as
    a job (other than this call's own): then the next step is to fetch its result."""
    from trainsleuth.server.longrun import running_note

    own = call.job.id if call.job is not None else None
    return running_note(call.ctx, "investigation_id", inv_id, exclude=own) or planned


def restate_step(out: StepOutputT, call: ToolCall, inv_id: str) -> StepOutputT:
    """A job's step output as it stands now (finish steps): phase and next step read again, new notices added."""
    now = step(call, inv_id)
    out.phase = now["phase"]
    out.next_step = now["next_step"]
    out.notices += [n for n in now["notices"] if n not in out.notices]
    return out


# ---------------------------------------------------------------------------- showing text to a person

_CONTROL = re.compile(
    r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def field_text(label: str, value: str | None) -> str:
    """`label: value`, where the value cannot pass for other lines of the dialog: control characters
    and terminal escapes are removed, and every continuation line is marked as part of this field."""
    clean = _CONTROL.sub("", str(value or "").replace("\r\n", "\n").replace("\r", "\n"))
    first, *rest = clean.split("\n") or [""]
    return "\n".join([f"{label}: {first}", *(f"    | {line}" for line in rest)])


def command_text(command: str) -> str:
    """A shell command shown verbatim, every line marked, so the person sees exactly what will run."""
    clean = _CONTROL.sub("", command.replace("\r\n", "\n").replace("\r", "\n"))
    return "\n".join(
        f"    $ {line}" if i == 0 else f"    > {line}" for i, line in enumerate(clean.split("\n"))
    )


def client_name(mcp_ctx: Context | None) -> str | None:
    """The MCP client's self-declared name and version (recorded with a decision; not proof of anything)."""
    if mcp_ctx is None:
        return None
    try:
        params = getattr(mcp_ctx.session, "client_params", None)
        info = getattr(params, "client_info", None) or getattr(params, "clientInfo", None)
    except Exception:
        return None
    if info is None:
        return None
    name, version = getattr(info, "name", None), getattr(info, "version", None)
    return f"{name} {version}".strip() if name else None


def has_form_elicitation(ctx: Context | None) -> bool:
    if ctx is None:
        return False
    try:
        caps = ctx.client_capabilities
    except Exception:
        return False
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _tty_ok() -> bool:
    try:
        with open("/dev/tty", "a", encoding="utf-8"):
            return True
    except OSError:
        return False


def _notifier_command() -> list[str] | None:
    import shutil

    if sys.platform == "darwin" and shutil.which("osascript"):
        return ["osascript", "-e"]
    if (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) and shutil.which("notify-send"):
        return ["notify-send", "trainsleuth"]
    return None


def private_channels(ctx: ServerContext) -> list[str]:
    """Where this server can show a person a code without it reaching the assistant: never a tool result,
    never stderr (a server the assistant starts itself writes its stderr into the assistant's shell)."""
    if ctx.config.approval_notifier is not None:
        return ["the server's configured approval channel"]
    out = []
    if _tty_ok():
        out.append(f"the terminal of the trainsleuth server (pid {os.getpid()}, started by: {launcher()})")
    if _notifier_command() is not None:
        out.append("a desktop notification")
    return out


def show_to_person(ctx: ServerContext, text: str, code: str) -> None:
    """Show a request and its code on the private channels; stderr only says that a decision waits."""
    notifier = ctx.config.approval_notifier
    if notifier is not None:
        notifier(f"{text}\n\nOne-time code: {code}")
        return
    banner = "=" * 72
    try:
        with open("/dev/tty", "w", encoding="utf-8") as tty:
            tty.write(f"\n{banner}\n{text}\n\nOne-time code: {code}\n{banner}\n")
    except OSError:
        pass
    command = _notifier_command()
    if command is not None:
        import subprocess

        message = f"One-time code {code}: trainsleuth asks you to decide (details: trainsleuth approve)"
        argv = (
            [*command, f'display notification "{message}" with title "trainsleuth"']
            if command[0] == "osascript"
            else [*command, message]
        )
        try:
            subprocess.run(argv, timeout=10, capture_output=True, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass


def offer_code(
    call: ToolCall, p: Protocol, purpose: str, inv_id: str, target: str, shown: str, ask: str
) -> str | None:
    """Record the request, show it with a fresh code on the private channels; returns where (None: nowhere)."""
    channels = private_channels(call.ctx)
    where = (
        " and ".join(channels) if channels else "no private channel (the person uses `trainsleuth approve`)"
    )
    code = p.open_request(purpose, inv_id, target, shown, where)
    if call.ctx.config.approval_notifier is None:
        sys.stderr.write(
            f"trainsleuth: a decision waits for the person ({purpose}, investigation {inv_id}): `trainsleuth "
            "approve` in their terminal shows it; no code is written here\n"
        )
        sys.stderr.flush()
    if channels:
        show_to_person(
            call.ctx,
            f"{shown}\n\nGive the code below to your assistant only if you {ask}. It works once, for this "
            "decision only, for 15 minutes. Or decide with `trainsleuth approve` in your own terminal.",
            code,
        )
        return where
    return None


class NotAsked(BaseModel):
    """A resolver's answer when the person was not asked (no elicitation, nothing to ask, or refused)."""

    kind: Literal["no_elicitation", "refused", "not_needed"]
    message: str = ""
    next_step: str | None = None


class PersonForm(BaseModel):
    """What the person answers in the client's dialog."""

    decision: Literal["approve", "reject"] = Field(description="Approve, or reject.")
    comment: str = Field(default="", description="Your words: why, or what to look at instead.")
    name: str = Field(default="", description="Your name, for the audit trail.")


def elicitation_only(call: ToolCall, p: Protocol) -> bool:
    if call.ctx.config.elicitation_only:
        return True
    return p.setting(APPROVAL_POLICY) == "elicitation_only"


def approval_wait_s() -> float:
    """How long a call waits for the person's answer in their terminal (TRAINSLEUTH_APPROVAL_WAIT_S, default
    30 s: within every client's timeout) before saying it is still pending."""
    try:
        return max(0.0, float(os.environ.get("TRAINSLEUTH_APPROVAL_WAIT_S", "30")))
    except ValueError:
        return 30.0


def person_by_code(
    call: ToolCall,
    p: Protocol,
    *,
    purpose: str,
    inv_id: str,
    target: str,
    code: str | None,
    shown: str,
    approver: str | None,
    words: str | None,
    decision: Literal["approve", "reject"] = "approve",
    ask: str,
) -> Approval:
    """The person's decision without a dialog: one made with `trainsleuth approve` in their terminal, or
    the one-time code they were shown. Without either, the request is recorded (and its code shown on a
    private channel) and the call is refused saying how the person decides."""
    if elicitation_only(call, p):
        raise p.refuse(
            inv_id,
            "this workspace accepts a person's decisions only through elicitation (its approval policy), and "
            "this client did not declare elicitation support",
            "decide from a client that shows dialogs (form elicitation); the person can change the policy with "
            "`trainsleuth state set approval any` in their own terminal",
        )
    # A decision already made in the person's terminal is taken at once; without a code, wait a while for one.
    wait_s = 0.0 if code and code.strip() else approval_wait_s()
    decided = p.wait_terminal_decision(purpose, inv_id, target, wait_s)
    if decided is not None:
        return Approval(
            path="terminal",
            decision="approve" if decided.status == "approve" else "reject",
            approver=decided.decided_by,
            words=decided.words,
            at=p.clock(),
            client=client_name(call.mcp_ctx),
            channel=decided.channel,
        )
    if code and code.strip():
        shown_on = p.redeem_code(purpose, inv_id, target, code)
        return Approval(
            path="one_time_code",
            decision=decision,
            approver=(approver or "").strip() or "the person (one-time code)",
            words=(words or "").strip() or None,
            at=p.clock(),
            client=client_name(call.mcp_ctx),
            channel=f"a one-time code shown on {shown_on}",
        )
    where = offer_code(call, p, purpose, inv_id, target, shown, ask)
    how = (
        f"the server has shown the person the request and a one-time code on {where} (never in a tool result), "
        "and they can also decide with `trainsleuth approve` in their own terminal"
        if where
        else "this server has no private channel to show the person a code (no terminal, no notifications): the "
        "person decides with `trainsleuth approve` in their own terminal"
    )
    raise ProtocolError(
        f"this needs the person's decision, and this client cannot show them a dialog: {how}"
        + (f"; no decision came within {wait_s:g} s" if wait_s else ""),
        f"ask the person; if they {ask}, either they give you the code (call again with code) or they run "
        "`trainsleuth approve` in their terminal (then call again)",
    )


def workspace_of(p: Protocol, inv_id: str) -> Path:
    return Path(p.get(inv_id).workspace)
