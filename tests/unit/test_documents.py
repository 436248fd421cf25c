"""The one loader every entrypoint reads manifests with (adapters/application/documents.py): strict
scalars, no duplicate keys, bounded aliases, depth and size, UTF-8 only. Each case failed
before (PyYAML's safe_load coerced, accepted, or ran for minutes)."""

from __future__ import annotations

import codecs

import pytest

from cronsource.adapters.application.documents import (
    MAX_DEPTH,
    MAX_EXPANDED_BYTES,
    DocumentError,
    from_client,
    load_json,
    load_yaml,
)
from tests.hang import no_hang


def _bomb(width: int = 9, levels: int = 9) -> str:
    """The billion-laughs shape: each level's anchor used `width` times by the next."""
    text = "a: &a [" + ",".join(['"lol"'] * width) + "]\n"
    prev = "a"
    for c in "bcdefghijk"[: levels - 1]:
        text += f"{c}: &{c} [" + ",".join([f"*{prev}"] * width) + "]\n"
        prev = c
    return text


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("v: yes", "yes", id="yes stays text"),
        pytest.param("v: on", "on", id="on stays text"),
        pytest.param("v: off", "off", id="off stays text"),
        pytest.param("v: 010", 10, id="leading zero is decimal"),
        pytest.param("v: 1:20", "1:20", id="no sexagesimal"),
        pytest.param("v: 2026-05-04", "2026-05-04", id="no dates"),
        pytest.param("v: 0o17", 15, id="0o octal"),
        pytest.param("v: true", True, id="true is a bool"),
        pytest.param("v: ~", None, id="tilde is null"),
    ],
)
def test_scalars_are_resolved_by_the_yaml_1_2_core_schema(text: str, expected: object) -> None:
    assert load_yaml(text, "t") == [{"v": expected}]


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("a: 1\nb: 2\na: 3\n", "duplicate key 'a'", id="duplicate key"),
        pytest.param("a: &x [*x]\n", "contains it", id="recursive alias"),
        pytest.param("[" * 1000 + "]" * 1000, f"deeper than {MAX_DEPTH}", id="deep flow"),
        pytest.param(
            "".join("  " * i + "k:\n" for i in range(950)),
            f"deeper than {MAX_DEPTH}",
            id="deep block",
        ),
        pytest.param(_bomb(), "expands past", id="alias bomb 9x9"),
        pytest.param(_bomb(6, 8), "expands past", id="alias bomb 6x8, under a kilobyte"),
        pytest.param("v: 1" + "0" * 5000, "too long", id="5000-digit integer"),
        pytest.param("{a: 1}: 2", "must be a scalar", id="mapping as a key"),
    ],
)
def test_hostile_yaml_is_refused_quickly_with_one_line(text: str, message: str) -> None:
    with no_hang("load_yaml"), pytest.raises(DocumentError) as e:  # refusing quickly: bench/
        load_yaml(text, "f.yaml")
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("f.yaml: ")


def test_the_alias_bomb_is_small_and_would_expand_past_the_object_limit() -> None:
    bomb = _bomb()
    assert len(bomb) < 700
    with pytest.raises(DocumentError, match=str(MAX_EXPANDED_BYTES)):
        load_yaml(bomb, "b")


def test_a_file_holds_a_kubectl_list_of_thousands_and_still_refuses_a_bomb() -> None:
    """`kubectl get cronworkflows -A -o yaml` prints one `kind: List` document: 3,000 small
    CronWorkflows passed 50,000 nodes, the bound of one object, and were refused as if
    aliased. A file's bounds grow with its size; an HTTP body's stay those of one object,
    and alias bombs are refused from both."""
    item = (
        "- apiVersion: argoproj.io/v1alpha1\n  kind: CronWorkflow\n"
        "  metadata: {{name: cw-{i}, namespace: default, labels: {{team: a}}}}\n"
        "  spec:\n    schedules: ['0 * * * *']\n    workflowSpec:\n      entrypoint: main\n"
        "      templates:\n      - name: main\n        container: {{image: busybox}}\n"
    )
    text = "apiVersion: v1\nkind: List\nitems:\n" + "".join(item.format(i=i) for i in range(3000))
    (doc,) = load_yaml(text, "list.yaml", file=True)
    assert len(doc["items"]) == 3000
    with pytest.raises(DocumentError, match="expands past"):
        load_yaml(text, "body")
    for bomb in (_bomb(), text + _bomb().replace("a:", "zz:", 1)):
        with no_hang("load_yaml"), pytest.raises(DocumentError, match="expands past"):
            load_yaml(bomb, "f.yaml", file=True)


def test_a_few_legitimate_aliases_and_merge_keys_still_load() -> None:
    docs = load_yaml("base: &b {x: 1}\nuse: *b\nmerged:\n  <<: *b\n  y: 2\n", "t")
    assert docs == [{"base": {"x": 1}, "use": {"x": 1}, "merged": {"x": 1, "y": 2}}]


@pytest.mark.parametrize(
    "data, message",
    [
        pytest.param(codecs.BOM_UTF16_LE + "a: 1".encode("utf-16-le"), "UTF-16", id="utf-16 bom"),
        pytest.param("a: 1".encode("utf-16-be"), "UTF-16", id="utf-16 without bom"),
        pytest.param(codecs.BOM_UTF32_LE + "a: 1".encode("utf-32-le"), "UTF-32", id="utf-32"),
        pytest.param(b"a: \xff\xfe\xfa", "not UTF-8", id="latin garbage"),
        pytest.param(b"a: '\x01'", "control characters", id="control character"),
    ],
)
def test_text_that_is_not_utf8_is_one_clear_line(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        load_yaml(data, "f.yaml")


def test_a_utf8_bom_is_accepted() -> None:
    assert load_yaml(codecs.BOM_UTF8 + b"a: 1", "t") == [{"a": 1}]


def test_input_over_3_mib_is_refused_before_parsing() -> None:
    with pytest.raises(DocumentError, match="larger than the limit of 3145728 bytes"):
        load_yaml(b"a: " + b"x" * (3 * 1024 * 1024), "big.yaml")


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param('{"a": 1, "a": 2}', "duplicate key", id="duplicate key"),
        pytest.param("[" * 50_000 + "]" * 50_000, "deeper than", id="deep"),
        pytest.param("[" * 150 + "]" * 150, "deeper than", id="deeper than the limit"),
        pytest.param("1" * 5000, "not valid JSON", id="5000-digit integer"),
    ],
)
def test_hostile_json_is_refused(text: str, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        load_json(text, "body")


def test_a_client_set_uid_is_dropped() -> None:
    doc = {"metadata": {"name": "a", "uid": "evil"}}
    assert from_client(doc) == {"metadata": {"name": "a"}}
