"""Which series is the loss: decided over the whole log, not line by line.

The vocabulary (`roles.role_of`) gives each name a prior role. Here the roles are settled from
evidence across the file and the user's corrections:

1. A user's `roles` (`--role loss=trl --role val_loss=tel`) win; the step key is applied while
   reading (`ReadContext.step_key`) and checked here.
2. Several names read as the loss: the one spelt the way trainers spell it (`loss`, `train_loss`,
   `lm loss`) is the loss and the others are its components (`loss` beside DETR's `loss_ce`).
3. No name reads as a loss: a series that behaves like one becomes the loss (present on most
   step records, positive, falling on average, not a whole-number counter), when exactly one does.
4. The verdict is then about the training loss; else its components; else the validation loss;
   else the perplexity.

Nothing found means the log is *not understood*: `healthy` is then no claim at all.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from statistics import median

from trainsleuth.tools.logs.collect import Collector
from trainsleuth.tools.logs.roles import ROLES, is_canonical_loss
from trainsleuth.tools.logs.series import Series
from trainsleuth.tools.logs.source import LogInputError

MIN_POINTS = 2  # fewer loss records than this say nothing about a run (two show a direction)
_NOT_A_LOSS = ("time", "eta", "remaining", "left", "elapsed", "wall", "clock", "count", "num", "size", "id")


@dataclass
class Understanding:
    judged: list[Series] = field(default_factory=list)  # the series the verdict is about
    how: dict[str, str] = field(default_factory=dict)  # name -> how its role was decided, when not by name
    reasons: list[str] = field(default_factory=list)  # why the log is not understood
    notes: list[str] = field(default_factory=list)

    @property
    def understood(self) -> bool:
        return bool(self.judged)


def parse_roles(pairs: list[str] | dict[str, str] | None) -> dict[str, str]:
    """`["loss=trl", "step=s"]` or `{"loss": "trl"}` -> {role: key}, checked against the roles."""
    if not pairs:
        return {}
    items = pairs.items() if isinstance(pairs, dict) else (_split(p) for p in pairs)
    out: dict[str, str] = {}
    for role, key in items:
        role = role.strip()
        if role not in ROLES or role == "other":
            close = difflib.get_close_matches(role, ROLES, n=1)
            raise LogInputError(
                f"unknown role {role!r}" + (f" (did you mean {close[0]!r}?)" if close else ""),
                f"roles are: {', '.join(r for r in ROLES if r != 'other')}; give them as ROLE=KEY, e.g. loss=trl",
            )
        if not key:
            raise LogInputError(f"role {role!r} has no key", "give it as ROLE=KEY, e.g. loss=trl")
        out[role] = key
    return out


def _split(pair: str) -> tuple[str, str]:
    role, sep, key = pair.partition("=")
    if not sep:
        raise LogInputError(f"{pair!r} is not ROLE=KEY", "give a role as ROLE=KEY, e.g. --role loss=trl")
    return role, key.strip()


def _points(s: Series) -> int:
    return s.total


def assign_roles(collector: Collector, user: dict[str, str]) -> Understanding:
    series = collector.series
    out = Understanding()
    for role, key in user.items():
        if role == "step":
            if key not in collector.step_sources and series:
                raise LogInputError(
                    f"no record of this log holds the step key {key!r}",
                    _available(key, list(series)),
                )
            out.how[key] = "user: step"
            continue
        s = series.get(key)
        if s is None:
            raise LogInputError(
                f"the log has no metric {key!r} (asked for as {role})", _available(key, list(series))
            )
        s.role = role
        out.how[key] = f"user: {role}"
        if role == "loss":  # the user's loss is the loss; others read as losses become its parts
            for other in series.values():
                if other is not s and other.role == "loss" and other.name not in user.values():
                    other.role = "loss_component"
                    out.how[other.name] = f"loss_component: the user chose {key!r} as the loss"
    losses = [s for s in series.values() if s.role == "loss"]
    if "loss" not in user and len(losses) > 1 and any(is_canonical_loss(s.name) for s in losses):
        for s in losses:
            if not is_canonical_loss(s.name) and not _prefixed_canonical(s.name):
                s.role = "loss_component"
                out.how[s.name] = "loss_component: a part of the loss printed beside it"
    if not any(s.role == "loss" for s in series.values()):
        guess = _loss_by_behaviour(list(series.values()), out)
        if guess is not None:
            guess.role = "loss"
    for role in ("loss", "loss_component", "val_loss", "perplexity"):
        found = [s for s in series.values() if s.role == role and _points(s) >= MIN_POINTS]
        if found:
            out.judged = found
            if role == "loss_component":
                out.notes.append(
                    "no total loss in the log: the verdict is about its loss components "
                    + ", ".join(s.name for s in found[:5])
                )
            elif role in ("val_loss", "perplexity"):
                out.notes.append(
                    f"no training loss in the log: the verdict is about the {role.replace('_', ' ')} "
                    + ", ".join(s.name for s in found[:3])
                )
            break
    if not out.judged:
        out.reasons.append(_why_not(list(series.values())))
    return out


def _prefixed_canonical(name: str) -> bool:
    """`rank0.log:loss`, `train/loss` in a run folder: a canonical name behind a file or run prefix."""
    return any(sep in name and is_canonical_loss(name.rsplit(sep, 1)[1]) for sep in (":", "/"))


def _loss_by_behaviour(series: list[Series], out: Understanding) -> Series | None:
    """The one series of unknown role that behaves like a training loss, if exactly one does."""
    dense = max((s.total for s in series), default=0)
    candidates: list[tuple[float, Series, str]] = []
    for s in series:
        if s.role != "other" or any(w in s.name.lower() for w in _NOT_A_LOSS):
            continue
        _, vals, _, _ = s.timeline()
        n = len(vals)
        if n < 8 or s.total < 0.5 * dense or min(vals) <= 0 or all(float(v).is_integer() for v in vals):
            continue
        k = max(2, n // 5)
        head, tail = median(vals[:k]), median(vals[-k:])
        if not head > 1.05 * tail:
            continue
        why = (
            f"loss: inferred from behaviour (present on {s.total} records, every value positive, "
            f"falls from about {head:.4g} to {tail:.4g})"
        )
        candidates.append((s.total, s, why))
    if not candidates:
        return None
    candidates.sort(key=lambda c: -c[0])
    if len(candidates) > 1 and candidates[1][0] >= 0.9 * candidates[0][0]:
        out.notes.append(
            "several unnamed series behave like a loss ("
            + ", ".join(c[1].name for c in candidates[:4])
            + "); none was chosen: name the loss with roles (--role loss=NAME)"
        )
        return None
    _, s, why = candidates[0]
    out.how[s.name] = why
    return s


def _why_not(series: list[Series]) -> str:
    if not series:
        return "no metric records were read"
    thin = [s for s in series if s.role in ("loss", "loss_component", "val_loss")]
    if thin:
        return (
            f"the loss series ({', '.join(s.name for s in thin[:3])}) hold fewer than {MIN_POINTS} records, "
            "too few to judge a run"
        )
    shown = ", ".join(f"{s.name} ({s.role})" for s in series[:8])
    return f"no series is recognised as a loss; the log holds {shown}" + (" ..." if len(series) > 8 else "")


def _available(key: str, names: list[str]) -> str:
    close = [n for n in names if n.lower() == key.lower()] or difflib.get_close_matches(key, names, n=3)
    listed = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    return f"{hint}the log's keys are: {listed or '(none)'}"
