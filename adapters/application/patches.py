"""The patches a client may send for a CronWorkflow, applied to the live object as the API
shows it (`GET`): an RFC 7386 merge patch and an RFC 6902 JSON patch, the two Kubernetes
takes besides server-side apply (`application/merge-patch+json`,
`application/json-patch+json`). Bad input raises FieldError naming the field (the patched
path, as the client wrote it, in the API's dotted form), so nothing is stored.

The JSON patch is the `jsonpatch` library's, applied one operation at a time so an error
names its operation. The merge patch is RFC 7386's own algorithm (section 2), a few lines
that no library would make shorter. What neither may do is change which object this is:
`metadata.name`, `metadata.namespace` and `metadata.uid` stay as they are (`identity_kept`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import jsonpointer

from cronsource.adapters.application.documents import MAX_EXPANDED_BYTES
from cronsource.adapters.application.inputs import FieldError

#: Most operations one JSON patch may hold (Kubernetes allows 10,000; a CronWorkflow has
#: far fewer fields than that).
MAX_OPERATIONS = 1000

_IDENTITY = ("name", "namespace", "uid")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: `patch` applied to `target` (neither changed). A member set to null is
    removed; an object merges member by member; anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def apply_merge_patch(live: dict[str, Any], patch: Any) -> dict[str, Any]:
    """A merge patch of the live object; the patch must be a JSON object (a patch that is
    not one would replace the whole object)."""
    if not isinstance(patch, dict):
        raise FieldError("<body>", "a merge patch is a JSON object", "body")
    patched = merge_patch(copy.deepcopy(live), patch)
    identity_kept(live, patched)
    return unset_suspend_is_false(live, server_fields_dropped(live, dict(patched)))


def apply_json_patch(live: dict[str, Any], patch: Any) -> Any:
    """An RFC 6902 patch of the live object, operation by operation; the first that fails
    (a path that is not there, a `test` that does not hold, a malformed operation) is a
    FieldError naming its path."""
    if not isinstance(patch, list):
        raise FieldError("<body>", "a JSON patch is a list of operations", "body")
    if len(patch) > MAX_OPERATIONS:
        raise FieldError("<body>", f"{len(patch)} operations, at most {MAX_OPERATIONS}", "body")
    doc: Any = copy.deepcopy(live)
    size = len(json.dumps(doc))
    for i, op in enumerate(patch):
        if not isinstance(op, dict):
            raise FieldError(f"[{i}]", "an operation is a JSON object", "body")
        path = op.get("path")
        field = _field(path) if isinstance(path, str) else f"[{i}].path"
        what = f"operation {i} ({op.get('op')!s} {path!s})"
        try:
            if op.get("op") == "copy" and isinstance(op.get("from"), str):
                # A copy is the one operation that grows the object beyond what the body
                # holds: bounded, or a few dozen copies would double it into gigabytes.
                size += len(json.dumps(jsonpointer.resolve_pointer(doc, op["from"])))
                if size > MAX_EXPANDED_BYTES:
                    raise FieldError(
                        field, f"{what}: the object would exceed {MAX_EXPANDED_BYTES} bytes", "body"
                    )
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
        except jsonpatch.JsonPatchTestFailed:
            there = jsonpointer.resolve_pointer(doc, str(path), None)
            raise FieldError(
                field,
                f"{what}: the test failed: the value there is {_show(there)},"
                f" not {_show(op.get('value'))}",
                "body",
            ) from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
            raise FieldError(field, f"{what}: {_brief(e)}", "body") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            # What the library raises for operations it does not validate (a path into a
            # string, a non-string `from`): still the client's operation that is wrong.
            raise FieldError(field, f"{what}: {type(e).__name__}: {e}", "body") from None
    if isinstance(doc, dict):
        identity_kept(live, doc)
        return unset_suspend_is_false(live, server_fields_dropped(live, doc))
    return doc


def identity_kept(live: dict[str, Any], patched: dict[str, Any]) -> None:
    """A patch edits an object; it cannot make it another one: a changed (or removed)
    name, namespace or uid is a FieldError naming it."""
    before = live.get("metadata") or {}
    after = patched.get("metadata")
    for key in _IDENTITY:
        was = before.get(key)
        now = after.get(key) if isinstance(after, dict) else None
        if was != now:
            raise FieldError(
                f"metadata.{key}",
                f"a patch cannot change it ({_show(was)} to {_show(now)});"
                " create the new object with POST and delete this one",
                "body",
            )


def server_fields_dropped(live: dict[str, Any], patched: dict[str, Any]) -> dict[str, Any]:
    """The patched object without `metadata.generation`: the server moves it on a spec
    change, which a value copied from the live object would stop, and a client's own value
    is ignored (documents.from_client), as the API server ignores it."""
    after = patched.get("metadata")
    if isinstance(after, dict):
        after.pop("generation", None)
    return patched


def unset_suspend_is_false(live: dict[str, Any], patched: dict[str, Any]) -> dict[str, Any]:
    """The patched object with `spec.suspend: false` where the patch removed it (a merge
    patch's null, a JSON patch's remove): a field the object no longer has is unset, which
    Argo reads as false. A document that does not name `suspend` keeps the live suspension
    (a file applied, a PUT), so without this the removal changed the spec and left it
    suspended."""
    spec, was = patched.get("spec"), live.get("spec") or {}
    if isinstance(spec, dict) and "suspend" in was and "suspend" not in spec:
        spec["suspend"] = False
    return patched


def _show(value: Any) -> str:
    text = "unset" if value is None else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _brief(e: Exception) -> str:
    """The library's message without the document it quotes (`... not found in {...}`)."""
    text = str(e)
    for cut in (" in {", " in ["):
        text = text.split(cut)[0]
    return text[:200]


def _field(pointer: str) -> str:
    """A JSON pointer as the API names fields: `/spec/schedules/0` is `spec.schedules[0]`."""
    if not pointer:
        return "<body>"
    out = ""
    for raw in pointer.lstrip("/").split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        out += f"[{part}]" if part.isdigit() or part == "-" else (f".{part}" if out else part)
    return out
