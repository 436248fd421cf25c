"""expr-lang's `duration()` reads a text as Go's time.ParseDuration does, in Argo's own code.

domain/durations.py is the one duration parser (schedules, annotations, flags and
expressions). For each generated text, cronsource's `duration(text).Milliseconds()` is put
to Argo (tests/argo/oracle, stopStrategy evaluation) as `== <that number>`: Argo answers
true when it reads the same duration, false when another, "error" when the text is not a
duration to Go (and then cronsource must refuse it too). Texts cover signs, fractions, every
Go unit (both micro signs), missing and unknown units, `0`, and Go's int64 overflow.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronsource.domain.expressions import ExpressionError, evaluate
from tests.argo import peer

_CRON: dict[str, Any] = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "CronWorkflow",
    "metadata": {"name": "c", "namespace": "default"},
    "spec": {"schedules": ["* * * * *"]},
    "status": {"failed": 0, "succeeded": 0},
}
_UNITS = ["ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h", "", "d", "M", "S", "sec"]


def _part() -> st.SearchStrategy[str]:
    whole = st.text("0123456789", max_size=8)
    fraction = st.none() | st.text("0123456789", max_size=12)
    return st.builds(
        lambda w, f, u: w + ("" if f is None else "." + f) + u,
        whole,
        fraction,
        st.sampled_from(_UNITS),
    )


_TEXTS = st.one_of(
    st.builds(
        lambda sign, parts: sign + "".join(parts),
        st.sampled_from(["", "", "-", "+"]),
        st.lists(_part(), min_size=0, max_size=3),
    ),
    st.sampled_from(
        [
            "0",
            "-0",
            "+0",
            "00",
            "2562047h47m16.854775807s",  # Go's largest Duration
            "-2562047h47m16.854775808s",  # and its smallest
            "2562047h47m16.854775808s",  # one nanosecond beyond
            "2562048h",
            "9223372036854775807ns",
            "9223372036854775808ns",
            "1.00000000000000000000001s",  # more fraction digits than a uint64 holds
            "-1.5ms",
            "1.9999999ms",
            " 1s",
            "1s ",
        ]
    ),
)


def _ours(text: str) -> int | None:
    try:
        result = evaluate(f"duration('{text}').Milliseconds()", {})
    except ExpressionError:
        return None
    assert isinstance(result, int)
    return result


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(_TEXTS, min_size=80, max_size=80, unique=True))
def test_duration_reads_every_text_as_go_does(texts: list[str]) -> None:
    ours = [_ours(text) for text in texts]
    answers = peer.evaluate(
        {
            "kind": "stop",
            "expression": f"duration('{text}').Milliseconds() == {0 if ms is None else ms}",
            "cronWorkflow": _CRON,
        }
        for text, ms in zip(texts, ours, strict=True)
    )
    rows = []
    for text, ms, answer in zip(texts, ours, answers, strict=True):
        theirs = "error" if answer["error"] is not None else answer["result"]
        expected = "error" if ms is None else True
        if theirs != expected:
            rows.append(f"  {text!r}: cronsource {ms} ms | argo {theirs} ({answer['error']})")
    assert not rows, f"{len(rows)} of {len(texts)} durations disagree with Go:\n" + "\n".join(rows)
