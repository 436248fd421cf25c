"""Every manifest cronsource reads from outside goes through here: CLI files (`apply`, `lint`,
`run PATHS`), HTTP bodies and `simulate` scenarios. One loader, so one set of bounds.

Why a loader of our own rather than `yaml.safe_load`:
- PyYAML resolves scalars by YAML 1.1: `yes`, `on` and `off` become booleans, `010` is
  octal, `1:20` is 80 and `2026-05-04` a date. Kubernetes (and JSON) read those as text. Here
  scalars are resolved by the YAML 1.2 core schema (`true`/`false`, `null`/`~`, decimal, `0o`
  and `0x` integers, floats); everything else stays a string.
- A key given twice in one mapping is an error (PyYAML keeps the last one silently).
- Aliases are bounded: a 600-byte file of nested anchors expands to gigabytes when something
  walks it (pydantic, `json.dumps`). While the node graph is composed, before anything is
  constructed, the size the document would have once expanded is counted and refused past
  MAX_EXPANDED_BYTES / MAX_EXPANDED_NODES, as go-yaml refuses "excessive aliasing".
- Nesting is bounded (MAX_DEPTH): past about 900 levels the recursive composer, pydantic and
  `json.dumps` raise RecursionError, which used to surface as a traceback.
- Text must be UTF-8 (as Kubernetes requires); UTF-16/32 and other bytes get one clear line.

Failures raise DocumentError: one line naming the source and, where known, line and column.
"""

from __future__ import annotations

import codecs
import json
from typing import TYPE_CHECKING, Any, cast

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, Event
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.resolver import Resolver

#: Largest input, in bytes: the HTTP request-body limit (Kubernetes' is 3 MiB too).
MAX_INPUT_BYTES = 3 * 1024 * 1024
#: Largest expanded document, in bytes of scalar text: the object size limit (1.5 MiB, as
#: etcd's default request limit bounds a Kubernetes object).
MAX_EXPANDED_BYTES = 3 * 1024 * 1024 // 2
#: Most nodes a YAML document may expand to (aliases counted at every use). A large Argo
#: workflowSpec has a few thousand. Composing is pure Python (about 50,000 nodes a second on
#: a busy core), so this bounds the time a hostile YAML body holds a worker thread and the
#: interpreter lock to about a second; JSON, parsed in C, is bounded by its size alone.
MAX_EXPANDED_NODES = 50_000
#: Deepest nesting of mappings and sequences. Real CronWorkflows are under 20 levels deep.
MAX_DEPTH = 100

_CORE = "tag:yaml.org,2002:"


class DocumentError(ValueError):
    """Input that cannot be read as manifests; the message is one line."""


# ---------------------------------------------------------------------- text


def decode(data: bytes | str, source: str) -> str:
    """`data` as text: UTF-8 (a leading BOM allowed), else DocumentError saying what it is."""
    if isinstance(data, str):
        return data
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        raise DocumentError(f"{source}: the file is UTF-32 text; save it as UTF-8")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or (
        len(data) >= 2 and (data[0] == 0) != (data[1] == 0)
    ):
        raise DocumentError(f"{source}: the file is UTF-16 text; save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DocumentError(
            f"{source}: not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start});"
            " a binary file?"
        ) from None
    if (nul := text.find("\0")) >= 0:
        # Valid UTF-8 can still be binary (a NUL is never in YAML or JSON text): say what it
        # is rather than the parser's "special characters are not allowed".
        raise DocumentError(f"{source}: a binary file (a NUL character at offset {nul}), not text")
    return text


def _check_input_size(size: int, source: str) -> None:
    if size > MAX_INPUT_BYTES:
        raise DocumentError(
            f"{source}: {size} bytes is larger than the limit of {MAX_INPUT_BYTES} bytes (3 MiB)"
        )


# ---------------------------------------------------------------------- YAML


class _CoreResolver(Resolver):
    """YAML 1.2 core schema resolution (plus `<<` merge keys, which go-yaml and kubectl
    accept). Built on an empty table: PyYAML's 1.1 resolvers are not inherited."""

    yaml_implicit_resolvers: dict[Any, Any] = {}


def _add_resolvers() -> None:
    import re

    table = [
        ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
        ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
        (
            "float",
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
            "-+0123456789.",
        ),
        ("merge", r"^<<$", "<"),
    ]
    for tag, pattern, first in table:
        _CoreResolver.add_implicit_resolver(_CORE + tag, re.compile(pattern), list(first))


_add_resolvers()


class _CoreConstructor(SafeConstructor):
    """SafeConstructor with core-schema numbers and bools and no duplicate keys."""

    yaml_constructors = dict(SafeConstructor.yaml_constructors)

    def construct_core_bool(self, node: ScalarNode) -> bool:
        return str(self.construct_scalar(node)).lower() == "true"

    def construct_core_int(self, node: ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        try:
            if text.startswith("0o"):
                return int(text[2:], 8)
            if text.startswith("0x"):
                return int(text[2:], 16)
            return int(text, 10)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            raise _at(node, f"the integer {text[:20]}... is too long") from None

    def construct_core_float(self, node: ScalarNode) -> float:
        text = str(self.construct_scalar(node)).lower()
        if text.endswith(".inf"):
            return float("-inf") if text.startswith("-") else float("inf")
        if text == ".nan":
            return float("nan")
        return float(text)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _CORE + "merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                raise _at(key_node, "a mapping key must be a scalar") from None
            if duplicate:
                raise _at(key_node, f"duplicate key {key!r}")
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


# YAML 1.2 core scalars instead of 1.1's, and none of 1.1's types that JSON has no word for
# (timestamp, binary, omap, pairs, set). A copy: SafeConstructor's own table stays as it is.
_CoreConstructor.yaml_constructors = {
    **{
        tag: build
        for tag, build in SafeConstructor.yaml_constructors.items()
        if tag not in {_CORE + t for t in ("timestamp", "binary", "omap", "pairs", "set")}
    },
    _CORE + "bool": _CoreConstructor.construct_core_bool,
    _CORE + "int": _CoreConstructor.construct_core_int,
    _CORE + "float": _CoreConstructor.construct_core_float,
}


def _mark(event: Event) -> yaml.Mark | None:
    """The event's position; libyaml's marks carry the same line and column as PyYAML's."""
    return cast("yaml.Mark | None", event.start_mark)


class _Oversize(Exception):
    """The document grew past a limit while being composed (DocumentError once caught)."""


class _BoundedComposer(Composer):
    """The composer, refusing while it builds the node graph: nesting deeper than MAX_DEPTH,
    an alias to a node that contains it, and a document whose size with every alias
    expanded passes MAX_EXPANDED_BYTES or MAX_EXPANDED_NODES. The size is counted as nodes
    are composed (an alias adds its target's whole size, known once the target is
    complete), so refusing a 3 MiB document costs the first 1.5 MiB of it, and a bomb of
    nested anchors costs a few hundred nodes."""

    _depth = 0

    if TYPE_CHECKING:  # the parser this is mixed with provides it (libyaml's or PyYAML's)

        def peek_event(self) -> Event: ...

    #: The bounds of each document (`reset_budget`): MAX_EXPANDED_BYTES and
    #: MAX_EXPANDED_NODES, more for a file of the user's own (`load_yaml`'s `file`).
    max_bytes = MAX_EXPANDED_BYTES
    max_nodes = MAX_EXPANDED_NODES

    def reset_budget(self) -> None:
        self._nodes = 0
        self._bytes = 0
        self._sizes: dict[int, tuple[int, int]] = {}  # complete node -> its expanded size

    def _count(self, nodes: int, size: int, mark: Any) -> None:
        self._nodes += nodes
        self._bytes += size
        if self._bytes > self.max_bytes or self._nodes > self.max_nodes:
            raise _Oversize(
                f"the document expands past {self._bytes} bytes in {self._nodes} nodes by"
                f" line {mark.line + 1} (aliases counted at every use); the limits are"
                f" {self.max_bytes} bytes and {self.max_nodes} nodes"
            )

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            event = self.peek_event()
            if self._depth > MAX_DEPTH:
                raise yaml.MarkedYAMLError(
                    problem=f"nested deeper than {MAX_DEPTH} levels",
                    problem_mark=_mark(event),
                )
            if isinstance(event, AliasEvent):
                target = self.anchors.get(event.anchor)
                if target is not None:
                    if id(target) not in self._sizes:
                        raise yaml.MarkedYAMLError(
                            problem="an alias refers to a node that contains it",
                            problem_mark=_mark(event),
                        )
                    self._count(*self._sizes[id(target)], event.start_mark)
                alias = super().compose_node(parent, index)
                assert alias is not None  # an alias event always composes to a node
                return alias
            nodes, size = self._nodes, self._bytes
            node = super().compose_node(parent, index)
            assert node is not None  # None only at the end of the stream, never mid-document
            own = len(node.value) + 1 if isinstance(node, ScalarNode) else 2
            self._count(1, own, event.start_mark)
            self._sizes[id(node)] = (self._nodes - nodes, self._bytes - size)
            return node
        finally:
            self._depth -= 1


if yaml.__with_libyaml__:  # libyaml's scanner and parser (the composer stays ours): ~10x faster
    from yaml._yaml import CParser

    class _Loader(_BoundedComposer, CParser, _CoreConstructor, _CoreResolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _BoundedComposer.__init__(self)
            _CoreConstructor.__init__(self)
            _CoreResolver.__init__(self)

else:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Loader(  # type: ignore[no-redef]
        Reader, Scanner, Parser, _BoundedComposer, _CoreConstructor, _CoreResolver
    ):
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)
            _BoundedComposer.__init__(self)
            _CoreConstructor.__init__(self)
            _CoreResolver.__init__(self)


def _at(node: Node, problem: str) -> yaml.MarkedYAMLError:
    return yaml.MarkedYAMLError(problem=problem, problem_mark=node.start_mark)


def _one_line(e: yaml.YAMLError) -> str:
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        what = e.problem or e.context or "invalid YAML"
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return f"{what}{where}"
    return " ".join(str(e).split())


def load_yaml(data: bytes | str, source: str, *, file: bool = False) -> list[Any]:
    """The YAML documents of `data` (empty documents left out), or DocumentError.

    `file`: a file the user reads in (`apply -f`, `lint`, `simulate`), where one document may
    be a `kind: List` of thousands of objects (`kubectl get cronworkflows -A -o yaml`): its
    bounds grow with its own size, a node per 4 bytes and its text once more, so that what
    aliases add on top of what is written stays bounded as in an HTTP body, whose bounds
    are those of one object (one worker's second of composing)."""
    _check_input_size(len(data), source)
    text = decode(data, source)
    docs: list[Any] = []
    try:
        loader = _Loader(text)
    except yaml.YAMLError as e:  # the pure-Python reader checks characters up front
        raise DocumentError(f"{source}: not valid YAML: {_one_line(e)}") from None
    if file:
        loader.max_bytes = MAX_EXPANDED_BYTES + len(text)
        loader.max_nodes = MAX_EXPANDED_NODES + len(text) // 4
    try:
        while loader.check_node():
            loader.reset_budget()
            node = loader.get_node()
            doc = loader.construct_document(node) if node is not None else None
            if doc is not None:
                docs.append(doc)
    except _Oversize as e:
        raise DocumentError(f"{source}: {e}") from None
    except yaml.YAMLError as e:
        raise DocumentError(f"{source}: not valid YAML: {_one_line(e)}") from None
    except RecursionError:
        raise DocumentError(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
    for doc in docs:
        _refuse_nul(doc, source)
    return docs


# ---------------------------------------------------------------------- JSON


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _depth(doc: Any) -> int:
    """Nesting depth of plain data, without recursion (the check must not overflow)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, d)
            if d > MAX_DEPTH:
                return d
            values = item.values() if isinstance(item, dict) else item
            stack.extend((v, d + 1) for v in values)
    return deepest


_NUL_WHY = ", which PostgreSQL cannot store as text"


def _refuse_nul(doc: Any, source: str) -> None:
    """DocumentError naming the first key or string holding U+0000. JSON and YAML may carry
    one (`\\u0000`, `"\\0"`); stored, PostgreSQL's jsonb cannot hold it as text, and every
    `SELECT` of the audit's documented views failed for every user after one such write.
    Called after `_depth`, so the walk is bounded."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            where = path.lstrip(".") or "<document>"
            raise DocumentError(f"{source}: {where}: holds U+0000 (NUL){_NUL_WHY}")
        if isinstance(item, dict):
            for k, v in item.items():
                key = str(k)
                if "\x00" in key:
                    where = path.lstrip(".") or "<document>"
                    raise DocumentError(f"{source}: {where}: a key holds U+0000 (NUL){_NUL_WHY}")
                stack.append((v, f"{path}.{key}"))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))


def load_json(data: bytes | str, source: str) -> Any:
    """One JSON document, with the same bounds as YAML (size, depth, no duplicate keys)."""
    _check_input_size(len(data), source)
    text = decode(data, source)
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise DocumentError(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # JSONDecodeError, duplicate keys, too many integer digits
        raise DocumentError(f"{source}: not valid JSON: {e}") from None
    if _depth(doc) > MAX_DEPTH:
        raise DocumentError(f"{source}: nested deeper than {MAX_DEPTH} levels")
    _refuse_nul(doc, source)
    return doc


# ---------------------------------------------------------------------- manifests from clients


def default_namespace(doc: Any, namespace: str | None) -> None:
    """`namespace` (`-n`, the request path's) for a document whose `metadata.namespace` is
    unset: missing, null or empty, which kubectl and the API server read alike (an empty one
    was refused as 'must not be empty')."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if namespace and isinstance(meta, dict) and not meta.get("namespace"):
        meta["namespace"] = namespace


def from_client(doc: Any) -> Any:
    """A manifest as a client sent it, minus what only the server sets.

    `metadata.uid` and `metadata.generation` are ignored, as the Kubernetes API server
    ignores them: a uid is
    part of a stream's identity (the Kubernetes watch passes the real one), so a client-set
    uid would start a second live CronWorkflow of the same name that nothing could address.
    """
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
        doc["metadata"].pop("uid", None)
        # The server's count of spec changes: a client's value (negative, past int64, going
        # back) is ignored, as the API server ignores it, and the generation moves on.
        doc["metadata"].pop("generation", None)
    return doc
