"""Queries built from errors and tracebacks keep what identifies the problem and drop what is local."""

from __future__ import annotations

from trainsleuth.tools.literature.query import build_query, looks_like_error

OOM_TRACEBACK = """\
Traceback (most recent call last):
  File "/home/alice/proj/train.py", line 88, in <module>
    loss.backward()
  File "/opt/conda/lib/python3.11/site-packages/torch/_tensor.py", line 522, in backward
    torch.autograd.backward(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; \
75.01 GiB already allocated; 1.2 GiB free) at 0x7f3a2c000000
"""

CHAINED = """\
Traceback (most recent call last):
  File "C:\\Users\\bob\\work\\data.py", line 10, in load
    raise KeyError("label")
KeyError: 'label'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "C:\\Users\\bob\\work\\train.py", line 3, in <module>
    main()
RuntimeError: DataLoader worker (pid 12345) exited unexpectedly with exit code 1
"""


def test_traceback_keeps_type_message_and_framework() -> None:
    q = build_query(OOM_TRACEBACK)
    assert q.startswith("OutOfMemoryError CUDA out of memory")
    assert "torch" in q
    for dropped in ("/home/alice", "site-packages", "0x7f3a", "79.15", "2.00", "line", "GiB"):
        assert dropped not in q, (dropped, q)


def test_last_exception_of_a_chain_wins_and_windows_paths_go() -> None:
    q = build_query(CHAINED)
    assert q.startswith("RuntimeError DataLoader worker")
    assert "exited unexpectedly with exit code" in q
    assert "12345" not in q and "Users" not in q and "bob" not in q


def test_log_line_prefixes_and_identifiers_with_acronyms() -> None:
    line = (
        "[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=14, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600321 milliseconds before timing out."
    )
    q = build_query(line)
    assert q.startswith("Watchdog caught collective operation timeout")
    assert "ALLREDUCE" in q and "600000" not in q and "Rank 3" not in q
    assert "ProcessGroupNCCL.cpp" not in q


def test_tokens_with_digits_inside_words_survive() -> None:
    q = build_query("ValueError: bf16 and fp16 are not supported on cuda:0 with torch 2.1.0 at /x/y/z.py")
    assert "bf16" in q and "fp16" in q and "torch" in q
    assert "2.1.0" not in q and "/x/y" not in q and not q.endswith(" at")


def test_plain_questions_are_kept_as_written() -> None:
    assert build_query("  why does fp16 overflow at 65504 ") == "why does fp16 overflow at 65504"
    assert not looks_like_error("loss plateaus after warmup")
    assert build_query("") == ""


def test_bare_exception_name_and_long_messages_are_bounded() -> None:
    assert build_query("AssertionError") == "AssertionError"
    long = "RuntimeError: " + " ".join(f"word{i}x" for i in range(200))
    q = build_query(long)
    assert q.startswith("RuntimeError word0x") and len(q.split()) <= 26
