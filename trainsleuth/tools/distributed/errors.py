"""The one expected-failure type of the distributed, precision, checkpoint and environment tools.

Tools never import the server, so they raise `AnalysisError(message, next_step)`; the server turns
it into an `isError` result carrying both.
"""

from __future__ import annotations

from trainsleuth.tools.runners.launch import RunnerError


class AnalysisError(Exception):
    def __init__(self, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.next_step = next_step


def from_runner_error(exc: RunnerError, what: str) -> AnalysisError:
    """Explain a runner failure in terms of what the user must change."""
    detail = f"\n{exc.detail[-1500:]}" if exc.detail else ""
    if exc.kind == "timeout":
        return AnalysisError(
            f"{what}: {exc.message}",
            "raise timeout_s, make the entrypoint smaller (tiny model, small batch), or look for a hang "
            "with dump_stacks while it runs",
        )
    if exc.kind == "cancelled":
        return AnalysisError(f"{what}: {exc.message}", "run it again when needed")
    if exc.kind == "no_torch":
        return AnalysisError(
            f"{what}: {exc.message}", "install torch in that interpreter, or pass python= one that has it"
        )
    if exc.kind == "out_of_memory":
        return AnalysisError(
            f"{what}: {exc.message}{detail}", "use a smaller model or batch in the entrypoint"
        )
    if exc.kind == "interpreter_failed":
        return AnalysisError(f"{what}: {exc.message}", "pass python= a working interpreter")
    if exc.kind in {
        "bad_entrypoint",
        "entrypoint_not_found",
        "function_not_found",
        "import_error",
        "entrypoint_raised",
        "contract_error",
    }:
        key = f" (key {exc.key!r})" if exc.key else ""
        return AnalysisError(
            f"{what}: the entrypoint is not usable{key}: {exc.message}{detail}",
            "fix the entrypoint so it returns {'model': ..., 'batch': ...} as the probe://entrypoint "
            "resource describes (write one in .trainsleuth/scratch/ if the repo has none), then run again",
        )
    return AnalysisError(
        f"{what} failed ({exc.kind}): {exc.message}{detail}",
        "check the output above; if the entrypoint runs on its own this is a trainsleuth bug",
    )
