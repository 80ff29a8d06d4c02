"""check-1: the rules of a step's ``check`` (docs/design.md §5), evaluated with CEL, never with Python ``eval``.

A step's ``check`` is an ordered list of rules ``{when: <CEL>, verdict: fail | unsure, note}`` or
``{use: NAME}`` naming a check registered in Python with :func:`register`. Expressions see ``inputs``
(dict), ``output`` (dict), ``evidence`` (list of ``{kind, ref, sha256?}``) and ``steps`` (step id ->
step data). The first rule that matches decides; none matching is ``pass``. Anything that goes wrong
while evaluating (a missing field, a wrong type, a non-boolean result, a bound hit, a registered check
that raises) is an ``unsure`` verdict with the reason, never an exception.

Which CEL package, and why
--------------------------
Both candidates were measured here (CPython 3.11, 2 vCPUs shared with other work; times from a quiet
moment, the ratios held at load 7-12). ``cel`` = common-expression-language 0.10.0 (Rust cel 0.14.5);
``celpy`` = cel-python 0.5.0 (pure Python on lark)::

                                              cel                      celpy
    compile a 5-clause rule                   ~60 us                   ~530 us
    evaluate it (incl. converting the data)   ~28 us                   ~700 us
    output.amount == 1500 (amount 1500.0),    true                     error: no such overload
      likewise 1 == 1.0 and 1 < 1.5                                    (the designer's rule breaks)
    undefined_fn(1)                           refused at compile time  found only at run time
                                              (Program.functions())
    10,000 nested parens                      ValueError, 8 ms         RecursionError, 0.68 s
                                              (parser limit 96)
    "a" * 10_000_000                          compiles in 0.09 s       compiles in 0.02 s
    exists() over 100,000 elements            0.04 s                   8.8 s (0.6 s converting)
    1,000 x 1,000 nested all/exists           0.14 s                   96 s
    ~120,000 random expressions (fuzzing)     no crash, none > 0.2 s   (not run)

We use ``common-expression-language`` (import ``cel``): 10-25x faster, spec-like numeric comparisons
across int and double, static introspection of the functions and variables an expression names (so
unknown functions and misspelt variables are refused when the process is loaded), and a parser that
refuses deep nesting by itself. It is actively released (0.5 -> 0.10 tracking the Rust crate) and
typed. Its costs, which this module works around: the Rust evaluator holds the GIL and cannot be
interrupted (hence the static cost bound below instead of a timeout), ``map``/``filter`` are
quadratic in the list length (4,000 elements: 0.4 s), and ``matches`` recompiles its regular
expression on every call. This module does not use cel-python.

Numbers
-------
Every number in the data (int or float) is given to CEL as a double, which is CEL's own mapping of
JSON numbers (``google.protobuf.Value``). So a verdict never depends on whether an agent wrote
``1500`` or ``1500.0``. Comparisons with int literals work (``output.amount > 1000``,
``output.count == 3``, ``x in [1, 2]``) because this CEL compares int and double numerically.
Arithmetic does not mix types in CEL: write ``output.amount * 2.0`` or ``output.count + 1.0``, or
convert with ``int(output.count) + 1``; a mixed operation is ``unsure`` with that hint.

Limits (every refusal says which)
---------------------------------
At load time (:class:`CheckCompileError`), in this order and before the text reaches the parser:
not text, more than ``MAX_EXPRESSION_CHARS`` (2,000) characters, empty, brackets nested deeper than
``MAX_NESTING`` (32; strings and ``//`` comments do not count). Then: syntax errors (with the
column), named functions outside ``STANDARD_FUNCTIONS`` (operators and the macros ``has all exists
exists_one map filter`` are always allowed; nothing extra is provided, so ``undefined_fn(1)`` or
``lowerAscii()`` are refused: use ``matches("(?i)...")``), names other than ``inputs output evidence
steps`` (macro variables and type names excepted), invalid regular-expression literals, more than
``MAX_REGEX_LITERALS`` (8) distinct ones, and expressions too costly even on empty data. Per check:
at most ``MAX_RULES`` (50) rules, notes of at most ``MAX_NOTE_CHARS`` (2,000) characters.

At evaluation time (``unsure`` with the reason). Only the parts of the context the expressions name
are converted, and they must be JSON-like and within ``MAX_DATA_VALUES`` (100,000) values,
``MAX_DATA_CHARS`` (1,000,000) characters of text and ``MAX_DATA_DEPTH`` (64) levels; converting data
at those limits takes up to ~0.3 s idle, ~1 s on a busy machine. Then, before each expression runs,
its cost is estimated from its structure and the actual sizes of the data it names, pessimistically,
following what this CEL really does (measured): a comprehension runs once per element of its list
(the list's real length when it is a plain path into the data, else the longest list anywhere); this
CEL copies a map field's whole value on every selection (``output.items`` inside a loop costs the
size of ``output.items`` each round), each element it binds, the values in list or map literals, and
the list so far in every round of ``map``/``filter`` (quadratic); comparisons with no literal side,
``in``, ``+`` and string functions may scan their operand; ``matches`` recompiles its pattern on every
call and costs what compiling it cost when the rule was loaded (0.1 s for a pattern taken from the
data). The sum over the rules of a check must stay within ``MAX_COST`` (5e8 units of ~1 ns):
measured at the bound, the slowest expressions found ran in 0.1-0.65 s on a busy 2-vCPU machine
(load 12), a linear ``exists`` over 99,000 elements in 0.4 s. Python-registered checks are trusted
code and are not bounded.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import cel
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MAX_COST", "MAX_DATA_CHARS", "MAX_DATA_DEPTH", "MAX_DATA_VALUES", "MAX_EXPRESSION_CHARS", "MAX_NESTING",
    "MAX_NOTE_CHARS", "MAX_REGEX_LITERALS", "MAX_RULES", "NAME_PATTERN", "ROOTS", "STANDARD_FUNCTIONS",
    "CheckCompileError", "CheckFunction", "CompiledCheck", "CompiledExpression", "CompiledRule", "Verdict",
    "compile_expression", "compile_rules", "register", "registered", "unregister",
]

MAX_EXPRESSION_CHARS = 2000
MAX_NESTING = 32
MAX_RULES = 50
MAX_NOTE_CHARS = 2000
MAX_REGEX_LITERALS = 8
MAX_DATA_VALUES = 100_000
MAX_DATA_CHARS = 1_000_000
MAX_DATA_DEPTH = 64
MAX_COST = 500_000_000

NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$"  # same shape as the process language's {use: NAME}
ROOTS = ("inputs", "output", "evidence", "steps")

# Named functions of the CEL standard library that this implementation provides. Operators (`_+_`,
# `@in`, `_[_]` ...) are always allowed; macros (has, all, exists, exists_one, map, filter) are
# expanded by the parser and never show up as functions.
STANDARD_FUNCTIONS = frozenset({
    "size", "contains", "startsWith", "endsWith", "matches",
    "int", "uint", "double", "string", "bytes", "timestamp", "duration", "dyn", "type",
    "getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear",
    "getHours", "getMinutes", "getSeconds", "getMilliseconds",
})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = re.compile(NAME_PATTERN)

# Cost units: about 1 ns each, calibrated on a busy 2-vCPU machine (see the module docstring).
_NODE = 50            # any token of the expression, evaluated once
_ITERATION = 500      # one round of a comprehension
_COMPARE = 5          # one value or character compared, searched or concatenated
_COPY = 100           # one value copied: this CEL copies a map field's whole value when selecting it,
#                       a comprehension's element when binding it, the values put in a list or map
#                       literal, and the list so far in every round of map/filter
_REGEX_MIN = 20_000   # compiling the simplest pattern, which `matches` does on every call
_REGEX_DYNAMIC = 100_000_000  # a pattern that comes from the data: the worst compile seen
_LINEAR_FUNCTIONS = frozenset({"contains", "startsWith", "endsWith", "string", "bytes", "int", "uint",
                               "double", "timestamp", "duration"})


class CheckCompileError(ValueError):
    """A check or expression that cannot be used; ``message`` says what is wrong and where."""

    def __init__(self, message: str, *, column: int | None = None, line: int | None = None,
                 index: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.column = column  # 1-based, within the expression, when known
        self.line = line      # 1-based line within the expression (block scalars), when known
        self.index = index    # rule index, for errors from compile_rules
        self.field = field    # "when", "verdict", "note", "use" or None


class Verdict(BaseModel):
    """What a check says about a submission; ``as_dict(at)`` is the contract's ``handoff.check``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    result: Literal["pass", "fail", "unsure"]
    issues: list[str] = Field(default_factory=list)
    note: str | None = None

    def as_dict(self, at: str) -> dict[str, Any]:
        return {"result": self.result, "issues": list(self.issues), "note": self.note, "at": at}


PASS = Verdict(result="pass")
UNSURE_NOTE = "The check could not be evaluated; a person should decide."

CheckFunction = Callable[[dict[str, Any]], "Verdict | str"]


# --------------------------------------------------------------------------------------------------
# Scanning: nesting, names, and the structure the cost estimate needs. Never raises.

@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "str", "num", "ident", "op", "other"
    text: str
    pos: int   # offset in the source


_OPS = ("&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "+", "-", "*", "/", "%", "?", ":", ".", ",",
        "(", ")", "[", "]", "{", "}")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+[uU]?|(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?[uU]?")
_STRING_PREFIX = re.compile(r"(?:[rR][bB]?|[bB][rR]?)?(?:'''|\"\"\"|'|\")")


def _scan(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c in " \t\r\n\f":
            i += 1
            continue
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        m = _STRING_PREFIX.match(source, i)
        if m:
            opening = m.group(0)
            raw = opening[0] in "rR" or (len(opening) > 1 and opening[1] in "rR")
            quote = opening.lstrip("rRbB")
            j = m.end()
            while j < n and not source.startswith(quote, j):
                if source[j] == "\\" and not raw:
                    j += 1
                elif len(quote) == 1 and source[j] == "\n":
                    break
                j += 1
            j = min(n, j + len(quote))
            tokens.append(_Token("str", source[i:j], i))
            i = j
            continue
        m = _NUMBER.match(source, i)
        if m and (c.isdigit() or (c == "." and not (tokens and tokens[-1].kind == "ident"))):
            tokens.append(_Token("num", m.group(0), i))
            i = m.end()
            continue
        m = _IDENT.match(source, i)
        if m:
            tokens.append(_Token("ident", m.group(0), i))
            i = m.end()
            continue
        for op in _OPS:
            if source.startswith(op, i):
                tokens.append(_Token("op", op, i))
                i += len(op)
                break
        else:
            tokens.append(_Token("other", c, i))
            i += 1
    return tokens


def _line_col(source: str, pos: int) -> tuple[int, int]:
    line = source.count("\n", 0, pos) + 1
    return line, pos - (source.rfind("\n", 0, pos) + 1) + 1


def _is_literal(tokens: list[_Token], k: int) -> bool:
    if not 0 <= k < len(tokens):
        return False
    t = tokens[k]
    return t.kind in ("str", "num") or (t.kind == "ident" and t.text in ("true", "false", "null"))


_Path = tuple[str, ...]  # a root name and the fields selected from it


@dataclass(slots=True)
class _Frame:
    """A bracketed part of an expression; a comprehension when ``macro`` is set.

    ``terms`` are paid each time the frame is evaluated: ``unit * size`` where the size is that of a
    path into the data (known when the rule runs), of the whole data ("T"), or of the expression's
    literals ("E"). ``pass_terms`` belong to a comprehension and are paid once per pass over its
    list, times the length of every comprehension in between: whatever is done to the elements
    themselves (selecting from them, comparing them, running over them) adds up to the size of the
    list they come from.
    """

    macro: str | None = None
    binder: str | None = None
    receiver: _Path | None = None  # the data the comprehension runs over, when it is a plain path
    constructed: bool = False      # it runs over a computed list (so elements may each be large)
    literal: bool = False          # a list or map literal
    names: bool = False            # mentions a name (a literal's values then get copied)
    builds: bool = False           # may produce values as large as the data (for map's copying)
    tokens: int = 0
    regex: int = 0
    terms: list[tuple[int, _Path | str]] = field(default_factory=list)
    pass_terms: list[tuple[int, tuple[_Frame, ...]]] = field(default_factory=list)
    children: list[_Frame] = field(default_factory=list)

    def cost(self, sizes: _Sizes) -> float:
        own = self.tokens * _NODE + self.regex + sum(unit * sizes.of(ref) for unit, ref in self.terms)
        inner = own + sum(child.cost(sizes) for child in self.children)
        if self.macro is None:
            return inner
        n, t = sizes.extent(self)
        total = n * (_ITERATION + inner) + t * _COPY * (n if self.constructed else 1)
        for unit, between in self.pass_terms:
            factor = 1.0
            for frame in between:
                factor *= sizes.extent(frame)[0]
            total += unit * t * factor
        if self.macro in ("map", "filter"):
            big = self.constructed or (self.macro == "map" and self.builds)
            total += _COPY * n * n * sizes.total if big else _COPY * n * (n + t)
        return total


@dataclass(slots=True)
class _Sizes:
    """Sizes of the data a rule runs on, as the cost estimate needs them."""

    variables: dict[str, Any]
    containers: dict[int, int]  # id of a converted dict or list -> its values and characters
    longest: float              # elements of the longest list or map, times the growth by `+`
    total: float                # all values and characters, times the growth by `+`
    literals: int

    def of(self, ref: _Path | str) -> float:
        if ref == "T":
            return self.total
        if ref == "E":
            return self.literals
        return self._at(ref)[1]  # type: ignore[arg-type]

    def _at(self, path: _Path) -> tuple[float | None, float]:
        value: Any = self.variables
        for name in path:
            if name == "*":  # any element: at most the whole of what is indexed
                return None, self.containers.get(id(value), self.total) if isinstance(value, dict | list) else 1
            if not isinstance(value, dict) or name not in value:
                return 0, 0  # evaluating this path will fail, cheaply
            value = value[name]
        if isinstance(value, dict | list):
            return len(value), self.containers.get(id(value), self.total)
        return None, (len(value) + 1 if isinstance(value, str) else 1)

    def extent(self, frame: _Frame) -> tuple[float, float]:
        """(rounds, size) of the list a comprehension runs over."""
        if frame.receiver is not None:
            length, size = self._at(frame.receiver)
            return (self.longest if length is None else length), size
        return self.longest, self.total


@dataclass(frozen=True, slots=True)
class _Shape:
    """What the cost estimate needs to know about an expression."""

    root: _Frame
    plus: int      # `+` tokens: how much lists and strings can grow
    literals: int  # elements a literal list or map of the expression can have

    def cost(self, variables: dict[str, Any], containers: dict[int, int], longest: int, size: int,
             source_chars: int) -> float:
        growth = 1 + self.plus
        sizes = _Sizes(variables, containers, max(longest, self.literals, 1) * growth,
                       (size + source_chars) * growth, self.literals)
        return self.root.cost(sizes)


_KEYWORDS = frozenset({"in", "true", "false", "null"})
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})


def _is_index(tokens: list[_Token], k: int) -> bool:
    """Token k is '[' indexing the value before it (not a list literal)."""
    if k == 0:
        return False
    prev = tokens[k - 1]
    return (prev.kind == "ident" and prev.text not in _KEYWORDS) or prev.text in (")", "]") or prev.kind == "str"


def _chain_back(tokens: list[_Token], end: int, whole: bool = False) -> _Path | None:
    """The path ending at token ``end`` (``a.b["c"].d``), or None if it is computed. With ``whole``,
    also None unless the path is the whole operand of a comparison (no arithmetic before it)."""
    parts: list[str] = []
    j = end
    while j >= 0:
        tok = tokens[j]
        if tok.text == "]" and j >= 3 and tokens[j - 1].kind == "str" and tokens[j - 2].text == "[" \
                and _is_index(tokens, j - 2):
            parts.append(_string_value(tokens[j - 1].text))
            j -= 3
            continue
        if tok.text == "]":  # a computed index: any element of what is indexed
            depth = 0
            while j >= 0:
                depth += {"]": 1, "[": -1}.get(tokens[j].text, 0)
                if depth == 0:
                    break
                j -= 1
            if j < 1 or not _is_index(tokens, j):
                return None
            parts.append("*")
            j -= 1
            continue
        if tok.kind == "ident" and tok.text not in _KEYWORDS:
            parts.append(tok.text)
            if j >= 1 and tokens[j - 1].text == ".":
                j -= 2
                continue
            if whole and j >= 1 and tokens[j - 1].text in _ARITHMETIC:
                return None
            return tuple(reversed(parts))
        return None
    return None


def _chain_forward(tokens: list[_Token], start: int) -> _Path | None:
    """The path of the operand starting at token ``start``, if it is a plain path and ends there."""
    count = len(tokens)
    if start >= count or tokens[start].kind != "ident" or tokens[start].text in _KEYWORDS:
        return None
    parts = [tokens[start].text]
    j = start + 1
    while j < count:
        if tokens[j].text == "." and j + 1 < count and tokens[j + 1].kind == "ident" \
                and not (j + 2 < count and tokens[j + 2].text == "("):
            parts.append(tokens[j + 1].text)
            j += 2
        elif tokens[j].text == "[" and j + 2 < count and tokens[j + 1].kind == "str" and tokens[j + 2].text == "]":
            parts.append(_string_value(tokens[j + 1].text))
            j += 3
        else:
            break
    if j < count and (tokens[j].text in (".", "[", "(") or tokens[j].text in _ARITHMETIC):
        return None
    return tuple(parts)


def _string_value(literal: str) -> str:
    """The text of a simple string literal (a field name); anything unusual maps to no field."""
    body = literal.lstrip("rR")
    if len(body) >= 2 and body[0] == body[-1] and body[0] in "'\"" and "\\" not in body:
        return body[1:-1]
    return "\x00unusual"


def _shape(tokens: list[_Token], regex_costs: dict[str, int]) -> _Shape:
    root = _Frame()
    stack = [root]
    count = len(tokens)

    def close() -> None:
        child = stack.pop()
        parent = stack[-1]
        if child.literal and child.names:
            parent.terms.append((_COPY, "T"))
            parent.builds = True
        parent.names = parent.names or child.names
        parent.builds = parent.builds or child.builds or child.macro is not None

    def place(path: _Path | None, unit: int) -> None:
        """Charge ``unit`` per value of the operand at ``path`` to the right frame."""
        frame = stack[-1]
        between: list[_Frame] = []
        if path is not None:
            for f in reversed(stack):
                if f.macro is not None and f.binder == path[0]:
                    if f.constructed:
                        break
                    f.pass_terms.append((unit, tuple(between)))
                    if f is not frame:
                        frame.builds = True
                    return
                if f.macro is not None:
                    between.append(f)
            else:
                if path[0] in ROOTS:
                    frame.terms.append((unit, path))
                    frame.builds = True
                    return
        frame.terms.append((unit, "T"))
        frame.builds = True

    for k, tok in enumerate(tokens):
        frame = stack[-1]
        frame.tokens += 1
        text = tok.text
        following = tokens[k + 1].text if k + 1 < count else ""
        if tok.kind == "op" and text in ("(", "[", "{"):
            child = _Frame()
            if text == "(" and k >= 2 and tokens[k - 1].kind == "ident" and tokens[k - 1].text in _MACROS \
                    and tokens[k - 2].text == ".":
                child.macro = tokens[k - 1].text
                if k + 2 < count and tokens[k + 1].kind == "ident" and tokens[k + 2].text == ",":
                    child.binder = tokens[k + 1].text
                receiver = _chain_back(tokens, k - 3) if k >= 3 else None
                if receiver is None:
                    child.constructed = True
                else:
                    owner = next((f for f in reversed(stack) if f.macro is not None and f.binder == receiver[0]),
                                 None)
                    if owner is not None:
                        # running over part of an element: bounded by the element, so by the outer list
                        place(receiver, _COPY)
                    elif receiver[0] in ROOTS:
                        child.receiver = receiver
                    else:
                        child.constructed = True
            elif text == "{" or (text == "[" and not _is_index(tokens, k)):
                child.literal = True
            frame.children.append(child)
            if len(stack) <= MAX_NESTING + 1:
                stack.append(child)
        elif tok.kind == "op" and text in (")", "]", "}"):
            if len(stack) > 1:
                close()
        elif tok.kind == "op" and text in _COMPARISONS:
            right = k + 2 if following == "-" else k + 1
            if not (_is_literal(tokens, k - 1) or _is_literal(tokens, right)):
                left_path = _chain_back(tokens, k - 1, whole=True) if k else None
                right_path = _chain_forward(tokens, k + 1)
                place(left_path or right_path, _COMPARE)
        elif tok.kind == "op" and text == "+":
            frame.terms.append((_COMPARE, "T"))
            frame.builds = True
        elif tok.kind == "op" and text == "." and k + 1 < count and tokens[k + 1].kind == "ident" \
                and not (k + 2 < count and tokens[k + 2].text == "("):
            base = _chain_back(tokens, k - 1) if k else None
            place(None if base is None else base + (tokens[k + 1].text,), _COPY)
        elif tok.kind == "ident" and text == "in":
            if following in ("[", "{"):
                frame.terms.append((_COMPARE, "E"))
            else:
                place(_chain_forward(tokens, k + 1), _COMPARE)
        elif tok.kind == "ident" and following == "(":
            if text in _LINEAR_FUNCTIONS or text == "matches":
                receiver = _chain_back(tokens, k - 2) if k >= 2 and tokens[k - 1].text == "." else None
                place(receiver, _COMPARE)
            if text == "matches":
                pattern = _regex_literal(tokens, k)
                frame.regex += regex_costs.get(pattern, _REGEX_DYNAMIC) if pattern else _REGEX_DYNAMIC
        elif tok.kind == "ident" and text not in _KEYWORDS:
            frame.names = True
            if text in ROOTS and not (k and tokens[k - 1].text == "."):
                frame.builds = True
    while len(stack) > 1:
        close()
    plus = sum(1 for t in tokens if t.kind == "op" and t.text == "+")
    literals = 1 + sum(1 for t in tokens if t.kind == "op" and t.text == ",")
    return _Shape(root, plus, literals)


def _regex_literal(tokens: list[_Token], k: int) -> str | None:
    """The pattern literal of ``x.matches('...')`` at token k, if the argument is one string literal."""
    if k + 3 < len(tokens) and tokens[k + 2].kind == "str" and tokens[k + 3].text == ")":
        return tokens[k + 2].text
    return None


@lru_cache(maxsize=512)
def _probe_regex(literal: str) -> tuple[int, str | None]:
    """Compile a pattern literal once with CEL: its cost in units, or what is wrong with it."""
    start = time.perf_counter_ns()
    try:
        cel.compile(f"''.matches({literal})").execute({})
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the Rust extension's panics derive from BaseException
        text = str(exc)
        reason = text.split("not a valid regex:", 1)[-1].strip() if "not a valid regex" in text else text
        return 0, " ".join(reason.split())[:200]
    return max(_REGEX_MIN, 2 * (time.perf_counter_ns() - start)), None


# --------------------------------------------------------------------------------------------------
# Expressions

@dataclass(frozen=True, slots=True, eq=False)
class CompiledExpression:
    """A CEL expression that passed every load-time check; cheap to evaluate many times."""

    source: str
    program: Any  # cel.Program
    functions: tuple[str, ...]
    variables: tuple[str, ...]
    _structure: _Shape

    def estimate_cost(self, context: Mapping[str, Any]) -> float:
        """Estimated cost in units (see MAX_COST) of evaluating this expression on ``context``
        (inputs, output, evidence, steps); raises ValueError when the data is beyond the limits."""
        try:
            converted = _convert(context)
        except _DataError as exc:
            raise ValueError(str(exc)) from None
        return self._cost(converted)

    def _cost(self, converted: _Converted) -> float:
        return self._structure.cost(converted.variables, converted.containers, converted.longest,
                                    converted.size, len(self.source))


def _error(message: str, source: str | None = None, pos: int | None = None) -> CheckCompileError:
    if source is None or pos is None:
        return CheckCompileError(message)
    line, col = _line_col(source, pos)
    where = f"column {col}" if line == 1 else f"line {line} column {col}"
    return CheckCompileError(f"{message} at {where}", column=col, line=line)


_CEL_ERROR = re.compile(r"<input>:(\d+):(\d+):\s*(.*)")


def _parse_error(exc: BaseException) -> CheckCompileError:
    text = str(exc)
    m = _CEL_ERROR.search(text)
    if not m:
        return CheckCompileError(f"cannot parse: {' '.join(text.split())[:300]}")
    line, col, what = int(m.group(1)), int(m.group(2)), m.group(3).strip()
    what = what.removeprefix("Syntax error:").strip()
    if "Recursion limit" in what:
        what = "nested too deeply"
    where = f"column {col}" if line == 1 else f"line {line} column {col}"
    return CheckCompileError(f"syntax error at {where}: {what[:300]}", column=col, line=line)


def _first_call(tokens: list[_Token], name: str) -> int | None:
    for k, tok in enumerate(tokens):
        if tok.kind == "ident" and tok.text == name and k + 1 < len(tokens) and tokens[k + 1].text == "(":
            return tok.pos
    return None


def _first_name(tokens: list[_Token], name: str) -> int | None:
    for k, tok in enumerate(tokens):
        if tok.kind == "ident" and tok.text == name and not (k and tokens[k - 1].text == "."):
            return tok.pos
    return None


def compile_expression(source: str) -> CompiledExpression:
    """Check and compile one CEL expression; raises only :class:`CheckCompileError`."""
    if not isinstance(source, str):
        raise CheckCompileError(f"expected a CEL expression as text, got {type(source).__name__}")
    if len(source) > MAX_EXPRESSION_CHARS:
        raise CheckCompileError(f"expression too long: {len(source)} characters, at most {MAX_EXPRESSION_CHARS}")
    if not source.strip():
        raise CheckCompileError("empty expression")
    try:
        return _compile(source)
    except CheckCompileError:
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # defensive: nothing else may escape a load
        raise CheckCompileError(f"cannot compile: {type(exc).__name__}: {str(exc)[:200]}") from None


def _compile(source: str) -> CompiledExpression:
    tokens = _scan(source)
    depth = 0
    for tok in tokens:
        if tok.kind == "op" and tok.text in ("(", "[", "{"):
            depth += 1
            if depth > MAX_NESTING:
                raise _error(f"nested deeper than {MAX_NESTING} brackets", source, tok.pos)
        elif tok.kind == "op" and tok.text in (")", "]", "}"):
            depth = max(0, depth - 1)
    try:
        program = cel.compile(source)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        raise _parse_error(exc) from None
    functions = tuple(program.functions())
    variables = tuple(program.variables())
    for name in functions:
        if _IDENT.fullmatch(name) and name not in STANDARD_FUNCTIONS:
            hint = (" (all, exists, exists_one, map and filter take a variable name and an expression)"
                    if name in _MACROS else "")
            raise _error(f"unknown function {name}(){hint}", source, _first_call(tokens, name))
    binders = {tokens[k + 3].text for k in range(len(tokens) - 4)
               if tokens[k].text == "." and tokens[k + 1].kind == "ident" and tokens[k + 1].text in _MACROS
               and tokens[k + 2].text == "(" and tokens[k + 3].kind == "ident" and tokens[k + 4].text == ","}
    for name in variables:
        if name not in ROOTS and name not in binders and name not in _TYPE_NAMES:
            raise _error(f"unknown name {name!r} (a check sees {', '.join(ROOTS)})", source,
                         _first_name(tokens, name))
    literals: list[str] = []
    for k, tok in enumerate(tokens):
        if tok.kind == "ident" and tok.text == "matches":
            literal = _regex_literal(tokens, k)
            if literal is not None and literal not in literals:
                literals.append(literal)
                if len(literals) > MAX_REGEX_LITERALS:
                    raise _error(f"more than {MAX_REGEX_LITERALS} different regular expressions",
                                 source, tokens[k + 2].pos)
                _, problem = _probe_regex(literal)
                if problem is not None:
                    raise _error(f"invalid regular expression ({problem})", source, tokens[k + 2].pos)
    regex_costs = {literal: _probe_regex(literal)[0] for literal in literals}
    shape = _shape(tokens, regex_costs)
    compiled = CompiledExpression(source, program, functions, variables, shape)
    empty = compiled._cost(_Converted({}, {}, 0, 0))
    if empty > MAX_COST:
        raise CheckCompileError(f"expression too costly: estimated {empty:.1e} units even on empty data, "
                                f"at most {MAX_COST:.0e}")
    return compiled


# --------------------------------------------------------------------------------------------------
# Registered checks

_registry: dict[str, CheckFunction] = {}
_registry_lock = threading.Lock()


def _valid_name(name: object) -> bool:
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def register(name: str) -> Callable[[CheckFunction], CheckFunction]:
    """Decorator: make ``fn(context) -> Verdict | "pass" | "fail" | "unsure"`` usable as ``{use: name}``.

    Registering a name again replaces the earlier function (a notebook cell run twice). The function
    receives the same context as expressions (inputs, output, evidence, steps) and must not change it.
    """
    if not _valid_name(name):
        raise ValueError(f"check name {name!r}: expected letters, digits, _ . - (at most 100), starting with a letter")

    def decorate(fn: CheckFunction) -> CheckFunction:
        if not callable(fn):
            raise TypeError(f"check {name!r}: expected a function")
        with _registry_lock:
            _registry[name] = fn
        return fn

    return decorate


def registered(name: str) -> CheckFunction | None:
    """The function registered under ``name``, or None."""
    with _registry_lock:
        return _registry.get(name)


def unregister(name: str) -> None:
    """Forget ``name`` (no error if it was not registered)."""
    with _registry_lock:
        _registry.pop(name, None)


# --------------------------------------------------------------------------------------------------
# Data: JSON-like Python values -> what CEL is given

class _DataError(Exception):
    pass


@dataclass(slots=True)
class _Converted:
    variables: dict[str, Any]
    containers: dict[int, int]  # id of each dict or list in ``variables`` -> its values and characters
    longest: int
    size: int


class _At(Exception):
    """Unwinds a conversion error, collecting the path on the way out (free when nothing is wrong)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.parts: list[str] = []


def _convert(context: Mapping[str, Any], roots: tuple[str, ...] = ROOTS) -> _Converted:
    """Copy the roots the rules use into CEL-ready values (the others are given as empty): numbers
    as doubles, within the data limits."""
    values = 0
    chars = 0
    longest = 0
    containers: dict[int, int] = {}

    def walk(value: Any, depth: int) -> Any:
        nonlocal values, chars, longest
        values += 1
        if value is None or value is True or value is False:
            return value
        kind = type(value)
        if kind is str:
            chars += len(value)
            return value
        if kind is float or kind is int:
            try:
                return float(value)
            except OverflowError:
                raise _At("number too large") from None
        if values > MAX_DATA_VALUES:
            raise _DataError(f"data too large to check: more than {MAX_DATA_VALUES} values")
        if chars > MAX_DATA_CHARS:
            raise _DataError(f"data too large to check: more than {MAX_DATA_CHARS} characters of text")
        if depth >= MAX_DATA_DEPTH:
            raise _At(f"nested deeper than {MAX_DATA_DEPTH} levels")
        if isinstance(value, Mapping | list | tuple) and values + len(value) > MAX_DATA_VALUES:
            raise _DataError(f"data too large to check: more than {MAX_DATA_VALUES} values")
        if isinstance(value, Mapping):
            longest = max(longest, len(value))
            before = values + chars
            out = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise _At(f"key {_short(repr(key), 40)}: keys must be text")
                chars += len(key)
                try:
                    out[key] = walk(item, depth + 1)  # noqa: F821  (deleted after its last use, below)
                except _At as exc:
                    exc.parts.append(f".{key}")
                    raise
            containers[id(out)] = values + chars - before
            return out
        if isinstance(value, list | tuple):
            longest = max(longest, len(value))
            before = values + chars
            out_list = []
            for i, item in enumerate(value):
                try:
                    out_list.append(walk(item, depth + 1))  # noqa: F821  (as above)
                except _At as exc:
                    exc.parts.append(f"[{i}]")
                    raise
            containers[id(out_list)] = values + chars - before
            return out_list
        if isinstance(value, str):
            chars += len(value)
            return str(value)
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, int | float):
            try:
                return float(value)
            except OverflowError:
                raise _At("number too large") from None
        raise _At(f"unsupported value {type(value).__name__} (expected JSON data)")

    if not isinstance(context, Mapping):
        raise _DataError(f"context: expected a dict, got {type(context).__name__}")
    variables: dict[str, Any] = {}
    try:
        for root in ROOTS:
            value = context.get(root)
            expected = list if root == "evidence" else dict
            if value is None:
                value = expected()
            if not isinstance(value, Mapping if expected is dict else list | tuple):
                raise _DataError(f"{root}: expected {'a list' if expected is list else 'an object'}, "
                                 f"got {type(value).__name__}")
            if root not in roots:
                value = expected()
            try:
                variables[root] = walk(value, 0)
            except _At as exc:
                raise _DataError(f"{root}{''.join(reversed(exc.parts))}: {exc.problem}") from None
    finally:
        # `walk` refers to itself through its closure: a reference cycle per check that only the garbage collector
        # would free. Deleting the name empties that cell (tests/test_engine_gc.py).
        del walk
    if values > MAX_DATA_VALUES:
        raise _DataError(f"data too large to check: more than {MAX_DATA_VALUES} values")
    if chars > MAX_DATA_CHARS:
        raise _DataError(f"data too large to check: more than {MAX_DATA_CHARS} characters of text")
    return _Converted(variables, containers, longest, values + chars)


# --------------------------------------------------------------------------------------------------
# Rules

@dataclass(frozen=True, slots=True)
class CompiledRule:
    index: int
    when: CompiledExpression | None = None
    verdict: Literal["fail", "unsure"] = "fail"
    note: str | None = None
    use: str | None = None


_RULE_KEYS = ("when", "verdict", "note")


def _compile_rule(index: int, raw: object) -> CompiledRule:
    where = f"check[{index}]"
    if not isinstance(raw, Mapping):
        raise CheckCompileError(f"{where}: expected {{when, verdict, note}} or {{use: NAME}}, "
                                f"got {type(raw).__name__}", index=index)
    present = {k: v for k, v in raw.items() if v is not None}
    if "use" in present:
        extra = sorted(str(k) for k in present if k != "use")
        if extra:
            raise CheckCompileError(f"{where}: {extra[0]}: not allowed with use", index=index, field=extra[0])
        return CompiledRule(index, use=_compile_use(raw["use"], f"{where}.use", index))
    for key in present:
        if key not in _RULE_KEYS:
            raise CheckCompileError(f"{where}.{key}: not declared (expected when, verdict, note)",
                                    index=index, field=str(key))
    if "when" not in present:
        raise CheckCompileError(f"{where}.when: required", index=index, field="when")
    verdict = present.get("verdict")
    if verdict not in ("fail", "unsure"):
        got = "missing" if verdict is None else f"got {verdict!r}"
        raise CheckCompileError(f"{where}.verdict: expected fail or unsure, {got}", index=index, field="verdict")
    note = present.get("note")
    if note is not None and not isinstance(note, str):
        raise CheckCompileError(f"{where}.note: expected text", index=index, field="note")
    if note is not None and len(note) > MAX_NOTE_CHARS:
        raise CheckCompileError(f"{where}.note: too long ({len(note)} characters, at most {MAX_NOTE_CHARS})",
                                index=index, field="note")
    try:
        expression = compile_expression(present["when"])
    except CheckCompileError as exc:
        raise CheckCompileError(f"{where}.when: {exc.message}", column=exc.column, line=exc.line,
                                index=index, field="when") from None
    return CompiledRule(index, when=expression, verdict=verdict, note=note or None)


def _compile_use(name: object, where: str, index: int | None) -> str:
    if not _valid_name(name):
        raise CheckCompileError(f"{where}: expected a check name (letters, digits, _ . -, starting with "
                                f"a letter), got {name!r}", index=index, field="use")
    return name  # type: ignore[return-value]


def compile_rules(rules: list[dict[str, Any]] | dict[str, Any]) -> CompiledCheck:
    """Compile a step's ``check``: a list of rules (each ``{when, verdict, note}`` or ``{use}``), or
    ``{use: NAME}``. Raises :class:`CheckCompileError` naming the rule (``check[1].when: ...``)."""
    if isinstance(rules, Mapping):
        if set(k for k, v in rules.items() if v is not None) == {"use"}:
            return CompiledCheck.of((CompiledRule(0, use=_compile_use(rules["use"], "check.use", None)),))
        rules = [rules]  # type: ignore[list-item]
    if not isinstance(rules, list | tuple):
        raise CheckCompileError(f"check: expected a list of rules or {{use: NAME}}, got {type(rules).__name__}")
    if not rules:
        raise CheckCompileError("check: expected at least one rule")
    if len(rules) > MAX_RULES:
        raise CheckCompileError(f"check: {len(rules)} rules, at most {MAX_RULES}")
    return CompiledCheck.of(tuple(_compile_rule(i, raw) for i, raw in enumerate(rules)))


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _runtime_reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else "?"
        return f"no such field {key!r} (test with has() first)"
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    text = str(exc).strip()
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0] if text else type(exc).__name__
    if isinstance(exc, OverflowError):
        return f"arithmetic overflow: {_short(first)}"
    if isinstance(exc, TypeError) and re.search(r"\b(float|double)\b", text) and re.search(r"\bint\b", text):
        return f"{_short(first).rstrip('.')}; numbers from the data are doubles: write 1.0 instead of 1, or use int()"
    return _short(first, 300)


def _describe(value: object) -> str:
    kind = {str: "text", int: "a number", float: "a number", list: "a list", dict: "a map",
            type(None): "null", bytes: "bytes"}.get(type(value), type(value).__name__)
    return f"{kind} ({_short(repr(value), 60)})"


def _unsure(index: int | None, reason: str) -> Verdict:
    label = "check" if index is None else f"check[{index}]"
    return Verdict(result="unsure", issues=[f"{label}: {reason}"], note=UNSURE_NOTE)


@dataclass(frozen=True, slots=True)
class CompiledCheck:
    """A step's compiled check; ``evaluate`` never raises."""

    rules: tuple[CompiledRule, ...]
    roots: tuple[str, ...]  # the parts of the context the expressions name

    @classmethod
    def of(cls, rules: tuple[CompiledRule, ...]) -> CompiledCheck:
        used = {name for rule in rules if rule.when is not None for name in rule.when.variables}
        return cls(rules, tuple(root for root in ROOTS if root in used))

    @property
    def uses(self) -> tuple[str, ...]:
        """The registered checks this check names (resolved at evaluate time)."""
        return tuple(r.use for r in self.rules if r.use is not None)

    def evaluate(self, context: dict[str, Any]) -> Verdict:
        """The first rule that matches decides; none matching is ``pass``; trouble is ``unsure``."""
        try:
            return self._evaluate(context)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # defensive: the contract needs a verdict, not a traceback
            return _unsure(None, f"internal error: {type(exc).__name__}")

    def _evaluate(self, context: dict[str, Any]) -> Verdict:
        converted: _Converted | None = None
        cel_context: Any = None
        spent = 0.0
        for rule in self.rules:
            if rule.use is not None:
                verdict = _run_registered(rule, context)
                if verdict.result != "pass":
                    return verdict
                continue
            if rule.when is None:  # a rule is a `use` or a `when`: the compiler makes no other
                raise RuntimeError(f"check rule {rule.index} has neither use nor when")
            if converted is None:
                try:
                    converted = _convert(context, self.roots)
                except _DataError as exc:
                    return _unsure(rule.index, str(exc))
                cel_context = cel.Context(variables=converted.variables)
            cost = rule.when._cost(converted)
            spent += cost
            if spent > MAX_COST:
                return _unsure(rule.index, f"too costly to evaluate on this data (estimated {spent:.1e} units, "
                                           f"at most {MAX_COST:.0e}; longest list or map: {converted.longest})")
            try:
                result = rule.when.program.execute(cel_context)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                return _unsure(rule.index, _runtime_reason(exc))
            if result is True:
                return Verdict(result=rule.verdict, issues=[f"check: {_short(rule.note or rule.when.source)}"],
                               note=rule.note)
            if result is not False:
                return _unsure(rule.index, f"expected true or false, got {_describe(result)}")
        return PASS


def _run_registered(rule: CompiledRule, context: dict[str, Any]) -> Verdict:
    name = rule.use or ""
    fn = registered(name)
    if fn is None:
        return _unsure(rule.index, f"no check registered as {name!r}")
    try:
        result = fn(context)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        return _unsure(rule.index, f"{name} raised {type(exc).__name__}: {_short(str(exc))}")
    if isinstance(result, Verdict):
        return result
    if result in ("pass", "fail", "unsure") and isinstance(result, str):
        return PASS if result == "pass" else Verdict(result=result, issues=[f"check: {name}"])
    return _unsure(rule.index, f"{name} returned {_describe(result)}, expected a Verdict or "
                               "'pass', 'fail' or 'unsure'")
