"""A Pratt parser following expr-lang's precedence tables, building the tree of
`domain.expressions.syntax`; unsupported features fail here, before anything runs.

Parsing is cached per source text, and depth is bounded so evaluation cannot recurse
without limit.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final, NoReturn

from cronsource.domain.expressions.builtins import FUNCTIONS, METHODS, PREDICATE_BUILTINS
from cronsource.domain.expressions.errors import SyntaxFailure, checked_source, expression_error
from cronsource.domain.expressions.syntax import (
    ARITHMETIC_OPERATORS,
    COMPARISON_OPERATORS,
    Array,
    Binary,
    Call,
    Coalesce,
    Comparison,
    Conditional,
    Literal,
    Logic,
    Member,
    MethodCall,
    Name,
    Node,
    Unary,
    depth,
    path_of,
)
from cronsource.domain.expressions.tokens import NEGATABLE, Token, describe, lex

_MAX_NESTING: Final = 64  # parser recursion (parentheses, unary operators, arrays)
_MAX_DEPTH: Final = 100  # depth of the tree (bounds the evaluator's recursion)


_BINARY: Final[dict[str, tuple[int, bool]]] = {
    "|": (0, False),
    "or": (10, False),
    "||": (10, False),
    "and": (15, False),
    "&&": (15, False),
    "==": (20, False),
    "!=": (20, False),
    "<": (20, False),
    ">": (20, False),
    ">=": (20, False),
    "<=": (20, False),
    "in": (20, False),
    "matches": (20, False),
    "contains": (20, False),
    "startsWith": (20, False),
    "endsWith": (20, False),
    "..": (25, False),
    "+": (30, False),
    "-": (30, False),
    "*": (60, False),
    "/": (60, False),
    "%": (60, False),
    "**": (100, True),
    "^": (100, True),
    "??": (500, False),
}
_UNARY: Final[dict[str, int]] = {"not": 50, "!": 50, "-": 90, "+": 90}
_COMPARISON_PRECEDENCE: Final = 20
_UNSUPPORTED_OPERATORS: Final = {
    "|": "the pipe operator '|' is not supported",
    "..": "ranges ('..') are not supported",
}


def _bool_constant(node: Node) -> bool | None:
    if isinstance(node, Literal) and isinstance(node.value, bool):
        return node.value
    return None


def _fold_logic(conjunction: bool, left: Node, right: Node) -> Node | None:
    """expr-lang's optimizer (optimizer/fold.go) rewrites `x && false` to false, `x || true`
    to true and drops a neutral `true &&` / `false ||` before anything runs, so `x` is never
    evaluated: `(now() - cronworkflow.lastScheduledTime).Seconds() < 0 && false` is false in
    Argo even before the first run, where evaluating `x` would fail. None: nothing to fold."""
    if any(isinstance(n, Literal) and not isinstance(n.value, bool) for n in (left, right)):
        return None  # expr-lang's type check refuses `1 && true` before it folds anything
    a, b = _bool_constant(left), _bool_constant(right)
    neutral, absorbing = (True, False) if conjunction else (False, True)
    if a is neutral:
        return right
    if b is neutral:
        return left
    if absorbing in (a, b):
        return Literal(absorbing)
    return None


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._index = 0
        self._nesting = 0

    @property
    def _current(self) -> Token:
        return self._tokens[self._index]

    def _peek(self) -> Token:
        return self._tokens[min(self._index + 1, len(self._tokens) - 1)]

    def _advance(self) -> Token:
        token = self._current
        if token.kind != "eof":
            self._index += 1
        return token

    def _is(self, kind: str, *values: str) -> bool:
        token = self._current
        return token.kind == kind and (not values or token.value in values)

    def _fail(self, reason: str, token: Token | None = None) -> NoReturn:
        raise SyntaxFailure(reason, (token or self._current).position)

    def _unexpected(self, token: Token | None = None) -> NoReturn:
        token = token or self._current
        self._fail(f"unexpected {describe(token)}", token)

    def _expect(self, kind: str, value: str) -> None:
        if not self._is(kind, value):
            self._unexpected()
        self._advance()

    def parse(self) -> Node:
        if self._is("eof"):
            self._fail("empty expression")
        node = self._expression(0)
        if not self._is("eof"):
            self._unexpected()
        return node

    def _expression(self, precedence: int) -> Node:
        self._nesting += 1
        if self._nesting > _MAX_NESTING:
            self._fail("expression is nested too deeply")
        try:
            if precedence == 0 and self._is("op", "let"):
                self._fail("'let' declarations are not supported")
            left = self._primary()
            previous = ""
            while self._is("op"):
                token = self._current
                symbol = token.value
                negate = symbol == "not"
                if negate:
                    follower = self._peek()
                    if follower.kind != "op" or follower.value not in NEGATABLE:
                        self._unexpected(follower)
                    symbol = follower.value
                info = _BINARY.get(symbol)
                if info is None or info[0] < precedence:
                    break
                if negate:
                    self._advance()
                operator_token = self._advance()
                if symbol in _UNSUPPORTED_OPERATORS:
                    self._fail(_UNSUPPORTED_OPERATORS[symbol], operator_token)
                if previous == "??" and symbol != "??":
                    self._fail(
                        f"operator {symbol!r} and coalesce expressions (??) cannot be mixed;"
                        " wrap either in parentheses",
                        operator_token,
                    )
                if symbol in COMPARISON_OPERATORS and not negate:
                    left = self._comparison(left, symbol)
                else:
                    next_precedence = info[0] if info[1] else info[0] + 1
                    left = self._binary(symbol, negate, left, self._expression(next_precedence))
                previous = symbol
            if precedence == 0:
                left = self._conditional(left)
            return left
        finally:
            self._nesting -= 1

    def _comparison(self, left: Node, symbol: str) -> Node:
        """``a < b <= c`` chains like expr-lang (and Python): ``a < b && b <= c``."""
        ops: list[str] = []
        comparators: list[Node] = []
        while True:
            ops.append(symbol)
            comparators.append(self._expression(_COMPARISON_PRECEDENCE + 1))
            if not (self._is("op") and self._current.value in _BINARY):
                break
            symbol = self._current.value
            if _BINARY[symbol][0] != _COMPARISON_PRECEDENCE:
                break
            token = self._advance()
            if symbol in _UNSUPPORTED_OPERATORS:
                self._fail(_UNSUPPORTED_OPERATORS[symbol], token)
        return Comparison(left, tuple(ops), tuple(comparators))

    @staticmethod
    def _binary(symbol: str, negate: bool, left: Node, right: Node) -> Node:
        # (the boolean folding below is expr-lang's optimizer, applied as the tree is built)
        if negate:
            return Comparison(left, (f"not {symbol}",), (right,))
        if symbol in ("||", "or", "&&", "and"):
            conjunction = symbol in ("&&", "and")
            if (folded := _fold_logic(conjunction, left, right)) is not None:
                return folded
            if isinstance(left, Logic) and left.conjunction is conjunction:
                return Logic(conjunction, (*left.operands, right))
            return Logic(conjunction, (left, right))
        if symbol == "??":
            return Coalesce(left, right)
        return Binary(ARITHMETIC_OPERATORS[symbol], left, right)

    def _conditional(self, node: Node) -> Node:
        while self._is("op", "?"):
            self._advance()
            if self._is("op", ":"):
                self._fail("the '?:' shorthand is not supported")
            body = self._expression(0)
            self._expect("op", ":")
            orelse = self._expression(0)
            node = Conditional(node, body, orelse)
        return node

    def _primary(self) -> Node:
        token = self._current
        if token.kind == "op" and token.value in _UNARY:
            self._advance()
            operand = self._expression(_UNARY[token.value])
            symbol = "!" if token.value == "not" else token.value
            constant = _bool_constant(operand)
            if symbol == "!" and constant is not None:
                # Folded as expr-lang's optimizer folds it, before `x || !false` is folded.
                return self._postfix(Literal(not constant))
            return self._postfix(Unary(symbol, operand))
        if self._is("bracket", "("):
            self._advance()
            inner = self._expression(0)
            self._expect("bracket", ")")
            return self._postfix(inner)
        if self._is("op", "#", "."):
            self._fail("predicate syntax ('#', '.') is not supported")
        if self._is("op", "::"):
            self._fail("'::' calls are not supported")
        return self._secondary()

    def _secondary(self) -> Node:
        token = self._current
        node: Node
        if token.kind == "ident":
            self._advance()
            constants: dict[str, bool | None] = {"true": True, "false": False, "nil": None}
            if token.value in constants:
                return Literal(constants[token.value])
            if self._is("bracket", "("):
                node = self._call(token)
            else:
                node = Name(token.value)
        elif token.kind in ("number", "string"):
            self._advance()
            node = Literal(token.literal)
        elif self._is("bracket", "["):
            node = self._array()
        elif self._is("bracket", "{"):
            self._fail("map literals are not supported")
        else:
            self._unexpected()
        return self._postfix(node)

    def _arguments(self) -> tuple[Node, ...]:
        self._expect("bracket", "(")
        arguments: list[Node] = []
        while not self._is("bracket", ")"):
            if arguments:
                self._expect("op", ",")
                if self._is("bracket", ")"):
                    break
            arguments.append(self._expression(0))
        self._expect("bracket", ")")
        return tuple(arguments)

    @staticmethod
    def _arity(what: str, expected: int, arguments: tuple[Node, ...], token: Token) -> None:
        if len(arguments) != expected:
            plural = "" if expected == 1 else "s"
            raise SyntaxFailure(
                f"{what} takes {expected} argument{plural}, got {len(arguments)}",
                token.position,
            )

    def _call(self, token: Token) -> Node:
        name = token.value
        if name in PREDICATE_BUILTINS:
            self._fail(f"function {name!r} is not supported", token)
        if name not in FUNCTIONS:
            self._fail(f"unknown function {name!r}", token)
        arguments = self._arguments()
        self._arity(f"{name}()", FUNCTIONS[name][1], arguments, token)
        return Call(name, arguments)

    def _array(self) -> Node:
        self._expect("bracket", "[")
        elements: list[Node] = []
        while not self._is("bracket", "]"):
            if elements:
                self._expect("op", ",")
                if self._is("bracket", "]"):
                    break
            elements.append(self._expression(0))
        self._expect("bracket", "]")
        return Array(tuple(elements))

    def _postfix(self, node: Node) -> Node:
        while True:
            token = self._current
            if token.kind == "op" and token.value == ".":
                self._advance()
                name_token = self._current
                if not (
                    name_token.kind == "ident"
                    or (name_token.kind == "op" and name_token.value.isidentifier())
                ):
                    self._fail("expected a name after '.'", name_token)
                self._advance()
                name = name_token.value
                if name.startswith("__"):
                    self._fail(f"access to {name!r} is not allowed", name_token)
                if self._is("bracket", "(") and isinstance(node, Name) and node.name == "sprig":
                    function_name = f"sprig.{name}"
                    if function_name not in FUNCTIONS:
                        self._fail(f"unknown function {function_name!r}", name_token)
                    arguments = self._arguments()
                    self._arity(
                        f"{function_name}()", FUNCTIONS[function_name][1], arguments, name_token
                    )
                    node = Call(function_name, arguments)
                elif self._is("bracket", "("):
                    if name not in METHODS:
                        self._fail(f"unknown method {name!r}", name_token)
                    arguments = self._arguments()
                    self._arity(f"{name}()", METHODS[name][1], arguments, name_token)
                    node = MethodCall(name, node, arguments)
                else:
                    base = path_of(node)
                    path = None if base is None else f"{base}.{name}"
                    node = Member(node, Literal(name), path)
            elif token.kind == "op" and token.value == "?.":
                self._fail("optional chaining ('?.') is not supported")
            elif token.kind == "bracket" and token.value == "[":
                self._advance()
                if self._is("op", ":"):
                    self._fail("slices are not supported")
                key = self._expression(0)
                if self._is("op", ":"):
                    self._fail("slices are not supported")
                self._expect("bracket", "]")
                if isinstance(key, Literal) and isinstance(key.value, str):
                    if key.value.startswith("__"):
                        self._fail(f"access to {key.value!r} is not allowed", token)
                base = path_of(node)
                path = None
                if base is not None and isinstance(key, Literal):
                    path = f"{base}[{key.value!r}]"
                node = Member(node, key, path)
            else:
                return node


def _unwrap(source: str) -> tuple[int, int]:
    """Offsets of the expression inside an optional ``{{= ... }}`` / ``{{ ... }}`` wrapper."""
    start, end = 0, len(source)
    while start < end and source[start].isspace():
        start += 1
    while end > start and source[end - 1].isspace():
        end -= 1
    if end - start >= 4 and source.startswith("{{", start) and source.endswith("}}", start, end):
        start, end = start + 2, end - 2
        if start < end and source[start] == "=":
            start += 1
    return start, end


@lru_cache(maxsize=512)
def compile_expression(source: str) -> Node:
    start, end = _unwrap(source)
    try:
        tree = _Parser(lex(source, start, end)).parse()
    except SyntaxFailure as exc:
        raise expression_error(
            "parse", source, f"{exc.reason} (at column {exc.position + 1})"
        ) from None
    except RecursionError:
        raise expression_error("parse", source, "expression is nested too deeply") from None
    except Exception as exc:  # defence in depth: nothing but ExpressionError escapes
        raise expression_error("parse", source, str(exc) or type(exc).__name__) from exc
    if depth(tree) > _MAX_DEPTH:
        raise expression_error("parse", source, "expression is nested too deeply")
    return tree


def validate_expression(source: str) -> None:
    """Check that `source` parses and uses only supported features (names are not checked)."""
    compile_expression(checked_source(source))
