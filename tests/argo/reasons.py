"""Which field a lint verdict names, for Argo's messages and for cronsource's.

Two refusals agree only if they refuse for the same reason: the lint differential compares the
field each side names, not only valid against invalid. Argo's words name a field in a few fixed
forms (its decoder's Go struct path, ValidateCronWorkflow's sentences, ValidateWorkflow's text
after "cannot validate Workflow: "); cronsource names it first, after the file.
"""

from __future__ import annotations

import re

#: ValidateCronWorkflow's sentences -> the field they are about.
_SENTENCES = (
    ("cron workflow name", "metadata.name"),
    ("cron workflow must have at least one schedule", "spec.schedules"),
    ("cron schedule ", "spec.schedules"),
    ("invalid timezone", "spec.timezone"),
    ("is not a valid concurrencyPolicy", "spec.concurrencyPolicy"),
    ("startingDeadlineSeconds must be positive", "spec.startingDeadlineSeconds"),
)
_VALIDATE = "cannot validate Workflow: "
_UNKNOWN = re.compile(r'unknown field "([^"]+)"')
_GO_FIELD = re.compile(r"Go struct field (?:[A-Za-z0-9]+\.)?([A-Za-z0-9_.\[\]]+) of type")
_INDEX = re.compile(r"\[\d+\]")
_OURS = re.compile(r"^error: [^:]+: ([A-Za-z0-9_.\[\]]+): (.*)$", re.MULTILINE)


def argo_field(message: str) -> str | None:
    """The field Argo's lint error names; None when it names none (a file it cannot read)."""
    text = message.split("(CronWorkflow): ", 1)[-1]
    if _VALIDATE in text:
        return "spec.workflowSpec"
    for phrase, field in _SENTENCES:
        if phrase in text:
            return field
    for pattern in (_UNKNOWN, _GO_FIELD):
        m = pattern.search(text)
        if m:
            return _INDEX.sub("", m.group(1))
    return None


def same_reason(argo: str, ours: str) -> bool:
    """cronsource's first error names the field Argo's names (and, for ValidateWorkflow, says
    what Argo says after "cannot validate Workflow: ")."""
    field = argo_field(argo)
    m = _OURS.search(ours)
    if field is None:
        return True
    if m is None:
        return False
    our_field, rest = _INDEX.sub("", m.group(1)), _INDEX.sub("", m.group(2))
    if field == "spec.workflowSpec" and _VALIDATE in argo:
        said = argo.split(_VALIDATE, 1)[1].strip()
        return our_field == field and said in m.group(2)
    if our_field == field or field in rest:
        return True
    if field.startswith(our_field + "."):
        return all(seg in rest for seg in field[len(our_field) + 1 :].split("."))
    return False
