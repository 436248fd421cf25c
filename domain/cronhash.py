"""Hashed `H` items in cron schedules, resolved exactly as Argo resolves them.

Argo PR #16604 (argoproj/argo-workflows, documented as "v4.2 and after", package
`util/cronhash`) lets a schedule say `H` where it means "some value, fixed for this
CronWorkflow", so that a thousand CronWorkflows generated with `0 0 * * *` stop firing at one
instant. A CronWorkflow that moves between Argo and cronsource must fire at the same minutes in
both, so every rule here is Argo's, observable difference for observable difference:

- Items: `H`, `H/<step>`, `H(<min>-<max>)` and `H(<min>-<max>)/<step>`, anywhere in a
  comma-separated field of a 5-field expression. An item is hashed when it starts with `H`
  (so `THU` is not), and the item index counts every item of its field (`30,H`: index 1).
- The hash is FNV-1a, 32 bits, over the UTF-8 bytes of
  `"<field index>.<item index>#<namespace>/<name>"`.
- A bare `H` picks `min + hash % size` in the field's hash range, which is the field's own
  range except day-of-month: 1-28, so that `H H H * *` runs in every month. An explicit
  `H(a-b)` may go up to the field's limit (1-31).
- `H/n` keeps the step and offsets the first run: `<min + hash % min(n, size)>-<max>/<n>`.
- Only a 5-field expression is looked at, after an optional `CRON_TZ=`/`TZ=` prefix. Anything
  else (`@daily`, `@every 1h`, 4 or 6 fields) is returned untouched for the cron parser to
  judge, which is how `H` in a descriptor or `@every` ends up refused.
- An expression without a hashed item is returned unchanged, whitespace and all; one with a
  hashed item is rebuilt with single spaces between fields.
- Errors carry Argo's own messages (`"H(30-10)" is malformed: range "30-10" is inverted`),
  with Go's quoting (`%q`) and Go's integer syntax (`strconv.Atoi`: an optional sign, ASCII
  digits, within int64).

The spec is never rewritten: callers derive the expansion from spec, namespace and name each
time they compile a schedule. `tests/unit/test_cronhash.py` holds the PR's own test table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

FIELD_NAMES: Final = ("minute", "hour", "day of month", "month", "day of week")


@dataclass(frozen=True)
class _Range:
    low: int
    high: int

    @property
    def size(self) -> int:
        return self.high - self.low + 1


#: Where a bare `H` lands, per field: day-of-month stops at 28 so that every month has the day.
_HASH_RANGES: Final = (_Range(0, 59), _Range(0, 23), _Range(1, 28), _Range(1, 12), _Range(0, 6))
#: What an explicit `H(<min>-<max>)` may span: cron's own ranges (robfig: day-of-week 0-6).
_FIELD_LIMITS: Final = (_Range(0, 59), _Range(0, 23), _Range(1, 31), _Range(1, 12), _Range(0, 6))

_FNV32_OFFSET: Final = 0x811C9DC5
_FNV32_PRIME: Final = 0x01000193
_INT64_MAX: Final = 2**63 - 1

#: Go's `unicode.IsSpace`, which `strings.Fields` splits on. Python's `str.split()` also
#: splits on U+001C..U+001F, which Go keeps inside a field: `H\x1c` must be one (malformed)
#: item, as in Argo, not a bare `H`.
_GO_SPACE: Final = re.compile(
    "[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
)
_GO_INT: Final = re.compile(r"[+-]?[0-9]+")
_PREFIXES: Final = ("CRON_TZ=", "TZ=")
_EXPECTED: Final = "expected `H`, `H/<step>`, `H(<min>-<max>)` or `H(<min>-<max>)/<step>`"


class MalformedHash(ValueError):
    """A hashed item Argo refuses; the message is Argo's, word for word."""


def fnv32a(data: bytes) -> int:
    """FNV-1a, 32 bits (Go's `hash/fnv.New32a`)."""
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def item_hash(namespace: str, name: str, field_index: int, item_index: int) -> int:
    """The hash of one item's position in one CronWorkflow. The position comes first, as in
    Argo, so that neighbouring positions do not get neighbouring values."""
    return fnv32a(f"{field_index}.{item_index}#{namespace}/{name}".encode())


def go_quote(s: str) -> str:
    """Go's `%q` of a string (`strconv.Quote`), so that error messages match Argo's byte for
    byte: printable characters as they are, the rest escaped the way Go escapes them."""
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            # Go's JSON decoder reads a lone surrogate as U+FFFD, which it prints as it is.
            out.append("\ufffd")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _go_atoi(text: str) -> int | None:
    """Go's `strconv.Atoi` on 64-bit: an optional sign and ASCII digits, within int64; None
    where Go returns an error (`+5` and `007` are numbers to Go, `5_0` and `٥` are not)."""
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        return None
    return value


def _split_prefix(schedule: str) -> tuple[str, str]:
    """A `CRON_TZ=<zone> ` (or `TZ=`) prefix, and the expression after it. The prefix keeps
    its leading blanks and the one blank after it, so an untouched schedule rebuilds exactly."""
    trimmed = schedule.lstrip(" \t")
    for prefix in _PREFIXES:
        if trimmed.startswith(prefix):
            cut = min((i for i in (trimmed.find(" "), trimmed.find("\t")) if i >= 0), default=-1)
            if cut >= 0:
                lead = schedule[: len(schedule) - len(trimmed)]
                return lead + trimmed[: cut + 1], trimmed[cut + 1 :]
    return "", schedule


def _parse_range(text: str, field_index: int) -> _Range:
    low_text, dash, high_text = text.partition("-")
    low, high = _go_atoi(low_text), _go_atoi(high_text)
    if not dash or low is None or high is None:
        raise MalformedHash(f"expected a range like `1-5`, got {go_quote(text)}")
    if low > high:
        raise MalformedHash(f"range {go_quote(text)} is inverted")
    limit = _FIELD_LIMITS[field_index]
    if low < limit.low or high > limit.high:
        raise MalformedHash(
            f"range {go_quote(text)} is outside of {limit.low}-{limit.high},"
            f" the range of the {FIELD_NAMES[field_index]} field"
        )
    return _Range(low, high)


def _expand_item(item: str, field_index: int, h: int) -> str:
    span = _HASH_RANGES[field_index]
    rest = item[1:]
    if rest.startswith("("):
        end = rest.find(")")
        if end < 0:
            raise MalformedHash(f"{go_quote(item)} is malformed: missing `)`")
        try:
            span = _parse_range(rest[1:end], field_index)
        except MalformedHash as e:
            raise MalformedHash(f"{go_quote(item)} is malformed: {e}") from None
        rest = rest[end + 1 :]
    if rest == "":
        return str(span.low + h % span.size)
    step = _go_atoi(rest.removeprefix("/"))
    if not rest.startswith("/") or step is None:
        raise MalformedHash(f"{go_quote(item)} is malformed: {_EXPECTED}")
    if step <= 0:
        raise MalformedHash(f"{go_quote(item)} is malformed: step must be greater than 0")
    # The step stays; only the first run moves, so schedules with one step spread out.
    offset = h % min(step, span.size)
    return f"{span.low + offset}-{span.high}/{step}"


def expand(schedule: str, namespace: str, name: str) -> str:
    """The schedule with every hashed item resolved for the CronWorkflow namespace/name;
    unchanged when it has none or is not a 5-field expression. Raises MalformedHash."""
    if "H" not in schedule:  # every hashed item starts with one; most schedules have none
        return schedule
    prefix, expr = _split_prefix(schedule)
    fields = [f for f in _GO_SPACE.split(expr) if f]
    if len(fields) != len(_HASH_RANGES):
        return schedule
    hashed = False
    out = []
    for field_index, field in enumerate(fields):
        items = field.split(",")
        for item_index, item in enumerate(items):
            if item.startswith("H"):
                h = item_hash(namespace, name, field_index, item_index)
                items[item_index] = _expand_item(item, field_index, h)
                hashed = True
        out.append(",".join(items))
    return prefix + " ".join(out) if hashed else schedule


def resolved_schedules(schedules: tuple[str, ...], namespace: str, name: str) -> dict[str, str]:
    """What Argo records in `status.resolvedSchedules`: each schedule that changes when its
    hashed items are resolved, mapped to what it resolves to, in key order (Go encodes a map
    with sorted keys). Schedules without `H` are not listed; a malformed one neither (it
    never passed admission, and Argo leaves it to the cron parser to report)."""
    out: dict[str, str] = {}
    for schedule in sorted(set(schedules)):
        try:
            expanded = expand(schedule, namespace, name)
        except MalformedHash:
            continue
        if expanded != schedule:
            out[schedule] = expanded
    return out
