"""prompt.py CASE ARM ID PROJECT -> the blind helper's whole brief on stdout."""

import sys
from pathlib import Path

case, arm, id_, project = sys.argv[1:5]
issue = (Path(__file__).resolve().parents[1] / "cases" / case / "ISSUE.md").read_text().strip()
root = f"/tmp/blind/{id_}"
repo = f"{root}/{project}"

common = f"""You are a coding assistant. A user asks you to debug their machine-learning training
repository, a git repository at `{repo}`. Their report, word for word:

> {issue.replace(chr(10), chr(10) + "> ")}

Rules of this session:
- Start EVERY shell command with `source {root}/env.sh && ` (it sets PATH to the user's Python
  environment, with torch, and cd's into the repository). Each shell call is a fresh shell.
- Work only in `{repo}` (and temporary files you make under `{root}/tmp`). Do NOT read or list anything
  under `/work`, `/opt`, other folders of `/tmp/blind`, or anywhere else on this machine: they hold other
  people's work and answer keys, and reading them voids your result. Do not use any search tool.
- Your very first command: `source {root}/env.sh && date +%s` (start time). When done, run
  `date +%s` again (end time).
- Done means: you found the root cause (and the commit that introduced it, if the history has one),
  made a minimal fix in the working tree (leave it uncommitted), and `./check.sh` passes. Be right
  rather than fast, but do not dawdle: stop after 40 minutes whatever the state.
- This is a measured session: work as you normally would.

Report at the end, briefly:
1. start and end times (the two `date +%s` outputs) and how many minutes that is;
2. root cause (one or two sentences), the introducing commit (hash and message) or "not in history";
3. the fix (`git diff`) and the last lines of `./check.sh`;
4. how many shell commands you ran in all, and which of them failed because of your own mistake
   (wrong option, wrong argument name, wrong path, syntax): list each one with its error in one line;
5. anything that wasted your time;
6. where your decisive evidence came from: the one command (yours, or a tool's call) whose output
   told you the root cause, quoted in one line.
"""

with_ts = """
The user has installed **trainsleuth**, a debugging tool for ML training, and asks you to use it for
this (`trainsleuth --help`). Drive it from the shell: `trainsleuth client tools` lists its tools,
`trainsleuth client describe TOOL` prints a tool's arguments with an example, and
`trainsleuth client call TOOL --arg name=value ...` calls one (the workspace is the current folder).
Begin with `trainsleuth client call start_investigation ...`; every answer names the next step. It
follows a protocol: a diagnosis is approved by the user before any fix. Approvals are the user's: when
trainsleuth waits for one, the user (watching) answers in their own terminal within a minute or two;
never run `trainsleuth approve` yourself. Do not edit the repository's code before the diagnosis is
approved; your own scratch files may go in `.trainsleuth/scratch/`. The fix counts once trainsleuth's
`verify_fix` says the investigation is resolved.
In your report, also give: how many `trainsleuth` calls you made, which failed and why.
"""

print(common + (with_ts if arm == "with" else ""))
