"""The expression language inside `{{ ... }}` (the spec's §13): references to other keys, arithmetic,
comparisons, `and`/`or`/`not` and conditionals.

    "{{ data.loader.batch_size * training.gradient.accumulation_steps }}"
    "{{ 1e-4 if model.n_layer > 4 else 3e-4 }}"
    "runs/{{ name }}-{{ date }}"

Grammar (lowest precedence first; a hand-written tokenizer and recursive descent, nothing handed to Python):

    expression := or_test ["if" or_test "else" expression]
    or_test    := and_test ("or" and_test)*
    and_test   := not_test ("and" not_test)*
    not_test   := "not" not_test | comparison
    comparison := sum [("==" | "!=" | "<" | "<=" | ">" | ">=") sum]
    sum        := term (("+" | "-") term)*
    term       := factor (("*" | "/" | "//" | "%") factor)*
    factor     := ("-" | "+") factor | atom
    atom       := NUMBER | STRING | "true" | "false" | "null" | reference | "(" expression ")"
    reference  := NAME ("." NAME)*                      a key of the config, or env.VAR, timestamp, date

There is no way to write an attribute access, a call, a subscript or an import: `(` after a name, `[`, `__`
and every other character are syntax errors. An expression has at most MAX_TOKENS tokens and MAX_DEPTH levels
of nesting, and a number at most MAX_NUMBER in size, so evaluating one is quick whatever it says.

Types are strict, as in the schema: arithmetic takes numbers (not booleans), `+` also joins two strings,
`and`/`or`/`not` and the condition of `if` take booleans, `<`-style comparisons take two numbers or two strings.
A mistake is an `ExpressionError` whose message names the part at fault.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_CHARS = 500
MAX_TOKENS = 100
MAX_DEPTH = 20
MAX_NUMBER = 1e100  # |values| above this are mistakes (and 10**10**10 must never be computed)
MAX_TEXT = 10_000  # characters of a joined string

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<string>'[^'\\\n]*'|"[^"\\\n]*")
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op>==|!=|<=|>=|//|[-+*/%<>().])
    )""", re.VERBOSE)
KEYWORDS = {"and", "or", "not", "if", "else", "true", "false", "null"}
_CONSTANTS = {"true": True, "false": False, "null": None}
_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
               "//": operator.floordiv, "%": operator.mod}
_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}


class ExpressionError(ValueError):
    """An expression that cannot be parsed or evaluated; the message says what and where."""


# --- the tree ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Constant:
    value: Any


@dataclass(frozen=True)
class Reference:
    path: tuple[str, ...]  # ("data", "loader", "batch_size")


@dataclass(frozen=True)
class Unary:
    op: str  # "-", "+", "not"
    operand: Any


@dataclass(frozen=True)
class Binary:
    op: str  # arithmetic, comparison, "and", "or"
    left: Any
    right: Any


@dataclass(frozen=True)
class Conditional:
    condition: Any
    then: Any
    otherwise: Any


# --- tokens and parser ------------------------------------------------------------------------------------------


def tokenize(text: str) -> list[tuple[str, str]]:
    """[(kind, text)] with kind number, string, name, keyword or op; ExpressionError on anything else."""
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"expression of {len(text)} characters (at most {MAX_CHARS})")
    tokens, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ExpressionError(f"unexpected {text[pos:].strip()[:20]!r}")
        kind = match.lastgroup
        value = match.group(kind)
        if kind == "name" and value in KEYWORDS:
            kind = "keyword"
        elif kind == "name" and "__" in value:
            raise ExpressionError(f"names with '__' ({value!r}) are not allowed")
        tokens.append((kind, value))
        pos = match.end()
        if len(tokens) > MAX_TOKENS:
            raise ExpressionError(f"more than {MAX_TOKENS} tokens")
    return tokens


def parse(text: str) -> Any:
    """The tree of the expression `text` (the inside of `{{ ... }}`)."""
    parser = _Parser(tokenize(text))
    if not parser.tokens:
        raise ExpressionError("empty expression")
    tree = parser.expression()
    if parser.pos < len(parser.tokens):
        raise ExpressionError(f"unexpected {parser.tokens[parser.pos][1]!r} after a complete expression")
    return tree


class _Parser:
    """Recursive descent: one method per grammar rule (module docstring), each returning a tree."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.pos, self.depth = tokens, 0, 0

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self, *values: str) -> str | None:
        """The next token's text if it is one of `values` (consumed), else None."""
        if self.pos < len(self.tokens) and self.tokens[self.pos][0] in ("op", "keyword") and self.peek() in values:
            self.pos += 1
            return self.tokens[self.pos - 1][1]
        return None

    def nested(self, rule: Callable[[], Any]) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(f"nested more than {MAX_DEPTH} levels deep")
        try:
            return rule()
        finally:
            self.depth -= 1

    def expression(self) -> Any:
        value = self.or_test()
        if self.take("if"):
            condition = self.or_test()
            if not self.take("else"):
                raise ExpressionError("'if' needs an 'else' (write: A if CONDITION else B)")
            return Conditional(condition, value, self.nested(self.expression))
        return value

    def chain(self, operand: Callable[[], Any], *ops: str) -> Any:
        """operand (op operand)*, grouped from the left (a - b - c is (a - b) - c)."""
        left = operand()
        while op := self.take(*ops):
            left = Binary(op, left, operand())
        return left

    def or_test(self) -> Any:
        return self.chain(self.and_test, "or")

    def and_test(self) -> Any:
        return self.chain(self.not_test, "and")

    def not_test(self) -> Any:
        if self.take("not"):
            return Unary("not", self.nested(self.not_test))
        return self.comparison()

    def comparison(self) -> Any:
        left = self.sum()
        op = self.take(*_COMPARE)
        if op:
            left = Binary(op, left, self.sum())
            if self.peek() in _COMPARE:
                raise ExpressionError("chained comparisons (a < b < c) are not supported; write a < b and b < c")
        return left

    def sum(self) -> Any:
        return self.chain(self.term, "+", "-")

    def term(self) -> Any:
        return self.chain(self.factor, "*", "/", "//", "%")

    def factor(self) -> Any:
        if op := self.take("-", "+"):
            return Unary(op, self.nested(self.factor))
        return self.atom()

    def atom(self) -> Any:
        if self.pos >= len(self.tokens):
            raise ExpressionError("the expression ends too early")
        kind, value = self.tokens[self.pos]
        self.pos += 1
        if kind == "number":
            return Constant(_number(value))
        if kind == "string":
            return Constant(value[1:-1])
        if kind == "keyword" and value in _CONSTANTS:
            return Constant(_CONSTANTS[value])
        if kind == "name":
            return self.reference(value)
        if value == "(":
            inside = self.nested(self.expression)
            if not self.take(")"):
                raise ExpressionError("a '(' is not closed")
            return inside
        raise ExpressionError(f"unexpected {value!r}")

    def reference(self, first: str) -> Reference:
        path = [first]
        while self.take("."):
            if self.pos >= len(self.tokens) or self.tokens[self.pos][0] != "name":
                raise ExpressionError(f"'{'.'.join(path)}.' must be followed by a key name")
            path.append(self.tokens[self.pos][1])
            self.pos += 1
        if self.peek() == "(":
            raise ExpressionError(f"'{'.'.join(path)}(...)': calls are not allowed")
        return Reference(tuple(path))


def _number(text: str) -> int | float:
    if text.isdigit():
        if len(text) > 30:
            raise ExpressionError(f"the number {text[:12]}... has more than 30 digits")
        return int(text)
    value = float(text)
    if not math.isfinite(value) or abs(value) > MAX_NUMBER:
        raise ExpressionError(f"the number {text} is out of range")
    return value


# --- evaluation -------------------------------------------------------------------------------------------------


def evaluate(tree: Any, lookup: Callable[[tuple[str, ...]], Any]) -> Any:
    """The value of `tree`; `lookup(path)` gives the value of a reference (or raises ExpressionError)."""
    if isinstance(tree, Constant):
        return tree.value
    if isinstance(tree, Reference):
        return lookup(tree.path)
    if isinstance(tree, Conditional):
        chosen = tree.then if _boolean(evaluate(tree.condition, lookup), "the condition of 'if'") else tree.otherwise
        return evaluate(chosen, lookup)
    if isinstance(tree, Unary):
        value = evaluate(tree.operand, lookup)
        if tree.op == "not":
            return not _boolean(value, "'not'")
        return _checked(-_numeric(value, tree.op) if tree.op == "-" else _numeric(value, tree.op))
    if tree.op in ("and", "or"):  # short-circuit, like Python: the right side may not need a value
        left = _boolean(evaluate(tree.left, lookup), f"'{tree.op}'")
        if left == (tree.op == "or"):
            return left
        return _boolean(evaluate(tree.right, lookup), f"'{tree.op}'")
    left, right = evaluate(tree.left, lookup), evaluate(tree.right, lookup)
    if tree.op in _COMPARE:
        return _compare(tree.op, left, right)
    if tree.op == "+" and isinstance(left, str) and isinstance(right, str):
        if len(left) + len(right) > MAX_TEXT:
            raise ExpressionError(f"a text longer than {MAX_TEXT} characters")
        return left + right
    a, b = _numeric(left, tree.op), _numeric(right, tree.op)
    if tree.op in ("/", "//", "%") and b == 0:
        raise ExpressionError(f"division by zero ({_show(left)} {tree.op} {_show(right)})")
    return _checked(_ARITHMETIC[tree.op](a, b))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _numeric(value: Any, op: str) -> int | float:
    if not _is_number(value):
        raise ExpressionError(f"'{op}' needs numbers, got {_show(value)}")
    return value


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ExpressionError(f"{where} needs true or false, got {_show(value)}")
    return value


def _compare(op: str, left: Any, right: Any) -> bool:
    same_kind = (_is_number(left) and _is_number(right)) or type(left) is type(right)
    if op in ("==", "!="):
        return _COMPARE[op](left, right) if same_kind else op == "!="
    if not same_kind or not isinstance(left, int | float | str) or isinstance(left, bool):
        raise ExpressionError(f"cannot compare {_show(left)} {op} {_show(right)}")
    return _COMPARE[op](left, right)


def _checked(value: int | float) -> int | float:
    if (isinstance(value, float) and not math.isfinite(value)) or abs(value) > MAX_NUMBER:
        raise ExpressionError(f"a result out of range ({_show(value)})")
    return value


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int | float):
        return repr(value) if abs(value) < 1e30 else f"{value:.3g}"
    return f"a {type(value).__name__}"
