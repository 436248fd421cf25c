"""adapters/entrypoints/cli/output.py: a stream whose reader has gone stops printing without
an error, and kubectl's words and shapes for lists (the installed CLI in a real pipe:
tests/e2e/test_cli_pipes_and_outputs.py)."""

from __future__ import annotations

import io
import os
from datetime import UTC, datetime, timedelta

import pytest

from cronsource.adapters.entrypoints.cli.output import (
    _ReaderMayLeave,
    ago,
    no_resources,
    one_or_list,
)


def test_a_write_after_the_reader_closed_the_pipe_goes_nowhere_without_an_error() -> None:
    read_end, write_end = os.pipe()
    stream = io.TextIOWrapper(io.BufferedWriter(io.FileIO(write_end, "w")), encoding="utf-8")
    quiet = _ReaderMayLeave(stream)
    quiet.write("first line\n")
    quiet.flush()
    assert os.read(read_end, 100) == b"first line\n"
    os.close(read_end)  # `head -1` has what it wanted and exits
    assert not quiet.reader_gone
    for _ in range(3):
        quiet.write("x" * 100_000 + "\n")  # larger than a pipe's buffer
        quiet.flush()
    assert quiet.reader_gone
    stream.close()  # the final flush finds /dev/null, not a broken pipe


def test_without_the_wrapper_the_same_write_raises() -> None:
    """What the wrapper is for: Python ignores SIGPIPE, so the write raises."""
    read_end, write_end = os.pipe()
    stream = io.TextIOWrapper(io.BufferedWriter(io.FileIO(write_end, "w")), encoding="utf-8")
    os.close(read_end)
    try:
        stream.write("x\n")
        stream.flush()
    except BrokenPipeError:
        pass
    else:
        raise AssertionError("a write to a closed pipe raised nothing")
    finally:
        try:
            stream.close()
        except BrokenPipeError:
            pass


def test_kubectls_words_and_shapes() -> None:
    assert no_resources("team-a") == "No resources found in team-a namespace."
    assert no_resources(None) == "No resources found"
    obj = {"kind": "CronWorkflow"}
    assert one_or_list([obj], listed=False) is obj
    assert one_or_list([obj], listed=True) == {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {},
        "items": [obj],
    }
    assert one_or_list([], listed=False)["items"] == []


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (-0.4, "now"),  # a run that just started read "in 0s", as if it were to come
        (0.4, "now"),
        (-5.0, "5s ago"),
        (3.0, "in 3s"),
        (-3600.0, "60m ago"),
        (7200.0, "in 2h"),
    ],
)
def test_ago_says_which_side_of_now(seconds: float, said: str) -> None:
    ref = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
    assert ago(ref + timedelta(seconds=seconds), ref) == said
