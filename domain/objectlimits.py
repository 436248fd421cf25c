"""Names, labels, annotations and object size, as the Kubernetes API server checks them.

Every limit is named in its message, so a refused manifest says which bound it crossed.
Patterns are matched with `fullmatch`: Python's `$` also matches before a final newline,
which let `abc\\n` through as a name (stored, unreachable over HTTP, a directory `default\\n`
on disk).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Final

#: DNS-1123 subdomain (object names): at most 253 characters.
DNS1123_SUBDOMAIN_MAX: Final = 253
#: DNS-1123 label (namespaces, label name parts): at most 63 characters.
DNS1123_LABEL_MAX: Final = 63
#: Label values: at most 63 characters.
LABEL_VALUE_MAX: Final = 63
#: The prefix of a qualified name (`example.com/` in `example.com/team`): a subdomain.
QUALIFIED_PREFIX_MAX: Final = 253
#: Total size of all annotation keys and values (Kubernetes' TotalAnnotationSizeLimitB).
ANNOTATIONS_MAX_BYTES: Final = 256 * 1024
#: Longest cron expression: a minute list of all 60 values is under 200 characters.
SCHEDULE_MAX_CHARS: Final = 1024
#: Largest object, as JSON (etcd's default request limit is 1.5 MiB).
OBJECT_MAX_BYTES: Final = 3 * 1024 * 1024 // 2

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:80] + "...")


def subdomain_problem(value: str) -> str | None:
    """Why `value` is not a DNS-1123 subdomain, or None."""
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"must be at most {DNS1123_SUBDOMAIN_MAX} characters (DNS-1123 subdomain)"
    if not _SUBDOMAIN.fullmatch(value):
        return (
            "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting"
            " and ending with a letter or digit"
        )
    return None


def label_problem(value: str) -> str | None:
    """Why `value` is not a DNS-1123 label (a namespace), or None."""
    if not value:
        return "must not be empty"
    if len(value) > DNS1123_LABEL_MAX:
        return f"must be at most {DNS1123_LABEL_MAX} characters (DNS-1123 label)"
    if not _LABEL.fullmatch(value):
        return (
            "must be a DNS-1123 label: lowercase letters, digits and '-', starting and"
            " ending with a letter or digit"
        )
    return None


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes qualified name (`[prefix/]name`), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return "prefix part must not be empty"
        if len(prefix) > QUALIFIED_PREFIX_MAX or not _SUBDOMAIN.fullmatch(prefix):
            return (
                f"prefix {_shown(prefix)} must be a DNS-1123 subdomain of at most"
                f" {QUALIFIED_PREFIX_MAX} characters"
            )
    if not name:
        return "name part must not be empty"
    if len(name) > DNS1123_LABEL_MAX:
        return f"name part must be at most {DNS1123_LABEL_MAX} characters"
    if not _QUALIFIED_NAME.fullmatch(name):
        return (
            "name part must be letters, digits, '-', '_' or '.', starting and ending with a"
            " letter or digit"
        )
    return None


def label_problems(labels: Mapping[str, str]) -> list[str]:
    """One line per bad label key or value."""
    out = []
    for key, value in labels.items():
        if (p := qualified_name_problem(key)) is not None:
            out.append(f"key {_shown(key)}: {p}")
        if len(value) > LABEL_VALUE_MAX:
            out.append(
                f"{key}: value is {len(value)} characters, at most {LABEL_VALUE_MAX} allowed"
            )
        elif not _LABEL_VALUE.fullmatch(value):
            out.append(
                f"{key}: value {_shown(value)} must be letters, digits, '-', '_' or '.',"
                " starting and ending with a letter or digit"
            )
    return out


def annotation_problems(annotations: Mapping[str, str]) -> list[str]:
    """Bad annotation keys, and the total size (which bounds what an expression can read)."""
    out = [
        f"key {_shown(k)}: {p}" for k in annotations if (p := qualified_name_problem(k)) is not None
    ]
    total = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if total > ANNOTATIONS_MAX_BYTES:
        out.append(
            f"total size {total} bytes is larger than the limit of {ANNOTATIONS_MAX_BYTES}"
            " bytes (256 KiB)"
        )
    return out


def schedule_problem(expression: str) -> str | None:
    """Why a cron expression is refused before it is parsed (its length), or None."""
    if len(expression) > SCHEDULE_MAX_CHARS:
        return (
            f"the expression is {len(expression)} characters, longer than the limit of"
            f" {SCHEDULE_MAX_CHARS}"
        )
    return None


def object_size_problem(doc: object) -> str | None:
    """Why `doc` (plain data) is too large to store as one object, or None."""
    try:
        size = len(json.dumps(doc, default=str, separators=(",", ":")).encode())
    except (RecursionError, ValueError):
        return "cannot be measured (nested too deeply or not plain data)"
    if size > OBJECT_MAX_BYTES:
        return (
            f"the object is {size} bytes as JSON, larger than the limit of {OBJECT_MAX_BYTES}"
            " bytes (1.5 MiB)"
        )
    return None
