"""Property-based: the parsers and the whole analysis never raise on arbitrary text or bytes."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainsleuth.tools.logs import LogInputError, analyze
from trainsleuth.tools.logs.errors import ErrorScanner
from trainsleuth.tools.logs.textparse import LINE_PARSERS, clean_line, to_float

# Text that looks a bit like logs, so the parsers' deeper branches are reached.
_pieces = st.sampled_from(
    ["iteration", " | ", "lm loss:", "loss=", "'loss': ", "{", "}", '"step": ', "nan", "inf", "-", "1e-4",
     "2.5E+00", "/ 1000", "[default3]:", "\r", "it/s", "%|", "[00:01<00:02, ", "iter 10: ", "step 5: ",
     "train loss ", ",", ":", "=", "Traceback (most recent call last)", "CUDA out of memory", "\n", " ", ">"]
)  # fmt: skip
log_like = st.lists(st.one_of(_pieces, st.text(max_size=8)), max_size=40).map("".join)


@given(st.one_of(st.text(max_size=300), log_like))
@settings(max_examples=300, deadline=None)
def test_line_parsers_never_raise(line: str) -> None:
    for name, parser in LINE_PARSERS.items():
        for step, metrics, _source in parser(line):
            assert step is None or isinstance(step, float), name
            assert all(isinstance(k, str) and isinstance(v, float) for k, v in metrics.items())
    clean_line(line)
    to_float(line)
    ErrorScanner().scan(line, 1, None)


@given(st.one_of(st.binary(max_size=2000), log_like.map(lambda s: s.encode("utf-8", "surrogatepass"))))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_analyze_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        for name in ("x.log", "x.csv", "x.jsonl", "trainer_state.json"):
            p = Path(d) / name
            p.write_bytes(data)
            try:
                report = analyze(p)
            except LogInputError as exc:  # a clear refusal is fine (binary input, broken JSON)
                assert exc.message
                continue
            assert report.healthy in (True, False, None)
            assert (report.healthy is None) == (report.verdict == "not_understood")
            for e in report.events:
                assert e.code
