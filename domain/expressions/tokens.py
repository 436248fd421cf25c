"""The lexer: expr-lang's literal syntax (Go escapes, raw strings, 0x/0o/0b ints, `_` digit
separators), comments, and words that are operators.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from cronsource.domain.expressions.errors import SyntaxFailure
from cronsource.domain.expressions.values import INT64_MAX

_IDENT_WORDS_AS_OPERATORS: Final = frozenset(
    {"not", "in", "or", "and", "matches", "contains", "startsWith", "endsWith", "let", "if", "else"}
)
NEGATABLE: Final = frozenset({"in", "matches", "contains", "startsWith", "endsWith"})
_SIMPLE_ESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "ident", "number", "string", "op", "bracket", "eof"
    value: str  # source text (operators, identifiers) or a description
    position: int  # offset in the original source
    literal: int | float | str | None = None  # the value of a number or string


def _is_ident_char(ch: str) -> bool:
    return ch.isalpha() or ch.isdecimal() or ch in "_$"


def describe(token: Token) -> str:
    return "end of expression" if token.kind == "eof" else f"token {token.value!r}"


def lex(text: str, start: int, end: int) -> list[Token]:
    tokens: list[Token] = []
    i = start
    while i < end:
        ch = text[i]
        nxt = text[i + 1] if i + 1 < end else ""
        if ch.isspace():
            i += 1
        elif ch in "'\"":
            j, value = _scan_string(text, i, end)
            tokens.append(Token("string", text[i:j], i, value))
            i = j
        elif ch == "`":
            close = text.find("`", i + 1, end)
            if close < 0:
                raise SyntaxFailure("literal not terminated", i)
            tokens.append(Token("string", text[i : close + 1], i, text[i + 1 : close]))
            i = close + 1
        elif "0" <= ch <= "9" or (ch == "." and nxt != "" and "0" <= nxt <= "9"):
            j = _scan_number(text, i, end)
            tokens.append(Token("number", text[i:j], i, _number_value(text[i:j], i)))
            i = j
        elif ch == "/" and nxt == "/":
            newline = text.find("\n", i, end)
            i = end if newline < 0 else newline + 1
        elif ch == "/" and nxt == "*":
            close = text.find("*/", i + 2, end)
            if close < 0:
                raise SyntaxFailure("unclosed comment", i)
            i = close + 2
        elif ch + nxt in ("??", "?.", "||", "::", ".."):
            tokens.append(Token("op", ch + nxt, i))
            i += 2
        elif ch in "&!=*<>" and nxt != "" and nxt in "&=*":
            tokens.append(Token("op", ch + nxt, i))
            i += 2
        elif ch in "([{)]}":
            tokens.append(Token("bracket", ch, i))
            i += 1
        elif ch in ",;%+-^?|:#/&!=*<>.":
            tokens.append(Token("op", ch, i))
            i += 1
        elif _is_ident_char(ch):
            j = i + 1
            while j < end and _is_ident_char(text[j]):
                j += 1
            word = text[i:j]
            kind = "op" if word in _IDENT_WORDS_AS_OPERATORS else "ident"
            tokens.append(Token(kind, word, i))
            i = j
        else:
            raise SyntaxFailure(f"unrecognized character {ch!r}", i)
    tokens.append(Token("eof", "", end))
    return tokens


def _scan_string(text: str, start: int, end: int) -> tuple[int, str]:
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < end:
        ch = text[i]
        if ch == quote:
            return i + 1, "".join(out)
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= end:
            break
        escape = text[i + 1]
        if escape in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[escape])
            i += 2
        elif escape in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[escape]
            digits = text[i + 2 : i + 2 + width]
            if len(digits) != width or not set(digits) <= _HEX:
                raise SyntaxFailure("invalid char escape", i)
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise SyntaxFailure("invalid char escape", i)
            out.append(chr(code))
            i += 2 + width
        elif escape in "01234567":
            digits = text[i + 1 : i + 4]
            if len(digits) != 3 or not set(digits) <= set("01234567") or int(digits, 8) > 255:
                raise SyntaxFailure("invalid char escape", i)
            out.append(chr(int(digits, 8)))
            i += 4
        else:
            raise SyntaxFailure("invalid char escape", i)
    raise SyntaxFailure("literal not terminated", start)


def _scan_number(text: str, start: int, end: int) -> int:
    digits = "0123456789_"
    i = start
    if text[i] == "0" and i + 1 < end and text[i + 1] in "xXoObB":
        digits = {"x": "0123456789abcdefABCDEF_", "o": "01234567_", "b": "01_"}[text[i + 1].lower()]
        i += 2
    while i < end and text[i] in digits:
        i += 1
    if i < end and text[i] == "." and not (i + 1 < end and text[i + 1] == "."):
        i += 1
        while i < end and text[i] in digits:
            i += 1
    if i < end and text[i] in "eE":
        i += 1
        if i < end and text[i] in "+-":
            i += 1
        while i < end and text[i] in digits:
            i += 1
    if i < end and _is_ident_char(text[i]):
        raise SyntaxFailure(f"bad number syntax: {text[start : i + 1]!r}", start)
    return i


def _number_value(word: str, position: int) -> int | float:
    raw = word.replace("_", "")
    lowered = raw.lower()
    try:
        if lowered.startswith("0x"):
            value: int | float = int(raw[2:], 16)
        elif "." in lowered or "e" in lowered:
            value = float(raw)
            if not math.isfinite(value):
                raise SyntaxFailure("float literal is too large", position)
            return value
        elif lowered.startswith("0b"):
            value = int(raw[2:], 2)
        elif lowered.startswith("0o"):
            value = int(raw[2:], 8)
        else:
            value = int(raw, 10)
    except ValueError:
        raise SyntaxFailure(f"invalid number literal {word!r}", position) from None
    if value > INT64_MAX:
        raise SyntaxFailure("integer literal is too large", position)
    return value
