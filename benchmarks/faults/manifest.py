"""The fault benchmark's labels: `manifest.yaml` next to the cases, loaded and checked here.

Each case is a probe entrypoint (`cases/probe/<file>.py:setup`) or a training log (`cases/logs/<path>`),
labelled with the codes that must be reported (`expect`), optionally the module (probe) or the step (logs)
each one concerns, and codes that may accompany them without counting against precision (`allow`).
Healthy cases have `healthy: true` and no `expect`: any warning or error on them is a false alarm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE / "cases"
MANIFEST = HERE / "manifest.yaml"

# Probe-table codes that `trainsleuth probe` itself does not report. precision_mismatch is covered by
# kind "precision" cases (compare_precision, through `trainsleuth client call`); rank_divergence and
# collective_mismatch (check_distributed, dump_stacks on a multi-process job) are not part of this benchmark.
EXCLUDED_PROBE_CODES = frozenset({"precision_mismatch", "rank_divergence", "collective_mismatch"})
PRECISION_CODES = frozenset({"precision_mismatch"})
KINDS = ("probe", "logs", "precision")


@dataclass(frozen=True)
class Expect:
    code: str
    module: tuple[str, ...] | None = None  # acceptable origin modules (any one is right)
    step: int | None = None  # expected step in the log's own units
    tol: int = 0  # accepted distance from `step`, in the same units


@dataclass(frozen=True)
class Case:
    id: str
    kind: str  # "probe", "logs" or "precision"
    target: str  # entrypoint "cases/probe/x.py:setup" or log path "cases/logs/x.log", relative to HERE
    expect: tuple[Expect, ...] = ()
    allow: tuple[str, ...] = ()
    healthy: bool = False
    steps: int | None = None  # --steps for the probe
    note: str = ""

    @property
    def path(self) -> Path:
        return HERE / self.target.split(":")[0] if self.is_entrypoint else HERE / self.target

    @property
    def is_entrypoint(self) -> bool:
        return self.kind in ("probe", "precision")

    @property
    def entrypoint(self) -> str:
        """The entrypoint as an absolute `file.py:function`."""
        file, _, func = self.target.rpartition(":")
        return f"{HERE / file}:{func}"


@dataclass
class Manifest:
    cases: list[Case] = field(default_factory=list)
    default_log_tol: int = 0

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}


class ManifestError(ValueError):
    pass


def _known() -> tuple[frozenset[str], frozenset[str]]:
    from trainsleuth.tools.findings import EXTRA_CODES, LOG_CODES, PROBE_CODES

    # codes added beyond the spec (findings.md "Additions") may be allowed as consequences
    return PROBE_CODES | frozenset(EXTRA_CODES), LOG_CODES


def parse(data: Any, base: Path = HERE, check_files: bool = True) -> Manifest:
    """Build and validate a Manifest from the YAML's data; raises ManifestError naming the bad case."""
    probe_codes, log_codes = _known()
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise ManifestError("the manifest must be a mapping with a 'cases' list")
    out = Manifest()
    seen: set[str] = set()
    for i, raw in enumerate(data["cases"]):
        where = f"case #{i}"
        if not isinstance(raw, dict):
            raise ManifestError(f"{where} is not a mapping")
        cid = raw.get("id")
        if not isinstance(cid, str) or not cid:
            raise ManifestError(f"{where} has no id")
        where = f"case {cid!r}"
        if cid in seen:
            raise ManifestError(f"{where} is listed twice")
        seen.add(cid)
        kind = raw.get("kind")
        if kind not in KINDS:
            raise ManifestError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
        is_entry = kind in ("probe", "precision")
        target = raw.get("entry") if is_entry else raw.get("path")
        if not isinstance(target, str) or not target:
            raise ManifestError(f"{where}: needs {'entry' if is_entry else 'path'}")
        if is_entry and (":" not in target or not target.split(":")[0].endswith(".py")):
            raise ManifestError(f"{where}: entry must look like cases/{kind}/file.py:function")
        if check_files:
            file = base / target.split(":")[0] if is_entry else base / target
            if not file.exists():
                raise ManifestError(f"{where}: {file} does not exist")
        valid = {
            "probe": probe_codes - EXCLUDED_PROBE_CODES,
            "logs": log_codes,
            "precision": PRECISION_CODES,
        }[kind]
        healthy = bool(raw.get("healthy", False))
        expects = []
        for e in raw.get("expect") or []:
            if not isinstance(e, dict) or not isinstance(e.get("code"), str):
                raise ManifestError(f"{where}: each expect entry needs a code")
            if e["code"] not in valid:
                raise ManifestError(f"{where}: {e['code']!r} is not a {kind} code of findings.md")
            module = e.get("module")
            if module is not None:
                module = (module,) if isinstance(module, str) else tuple(module)
                if not module or not all(isinstance(x, str) for x in module):
                    raise ManifestError(f"{where}: module must be a string or a list of strings")
            step = e.get("step")
            if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
                raise ManifestError(f"{where}: step must be an integer")
            tol = e.get("tol", data.get("default_step_tol", 0))
            if not isinstance(tol, int) or tol < 0:
                raise ManifestError(f"{where}: tol must be a non-negative integer")
            expects.append(Expect(e["code"], module, step, tol))
        if healthy and expects:
            raise ManifestError(f"{where}: a healthy case expects nothing")
        if not healthy and not expects:
            raise ManifestError(f"{where}: a broken case must expect at least one code")
        allow = tuple(raw.get("allow") or ())
        bad_allow = [c for c in allow if c not in probe_codes | log_codes]
        if bad_allow:
            raise ManifestError(f"{where}: unknown codes in allow: {bad_allow}")
        steps = raw.get("steps")
        if steps is not None and (not isinstance(steps, int) or steps < 1):
            raise ManifestError(f"{where}: steps must be a positive integer")
        out.cases.append(
            Case(
                id=cid,
                kind=kind,
                target=target,
                expect=tuple(expects),
                allow=allow,
                healthy=healthy,
                steps=steps,
                note=str(raw.get("note", "")),
            )
        )
    return out


def load_manifest(path: Path = MANIFEST) -> Manifest:
    import yaml

    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return parse(data, base=path.parent)
