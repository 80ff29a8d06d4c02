"""Safe YAML -> plain Python, remembering where every value stood (line, column; 1-based).

Uses PyYAML's safe loader (libyaml when available) to compose nodes, then builds the value
ourselves so that duplicate keys are refused, tags other than plain YAML values are refused,
and alias expansion (billion laughs) and nesting depth are bounded. Nesting is measured on the
event stream first: the composer is recursive and would overflow the stack on `[[[[…`.

Plain scalars resolve by the YAML 1.2 core schema, not PyYAML's YAML 1.1 one: only true/false are
booleans (`NO`, `yes`, `on` stay text, so `enum: [NO, SE, DK]` is three country codes), there is no
sexagesimal (`12:30` is text, not 750) and a leading zero is no octal (`0777` is 777; octal is `0o777`).
Merge keys (`<<: *base`) are kept: designers use them and they change no value's type.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

MAX_FILE_BYTES = 1_000_000
MAX_NODES = 200_000
MAX_DEPTH = 64

# libyaml is ~5x faster than the pure-Python loader; both give the same nodes and marks.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # type: ignore[assignment]

_TAG = "tag:yaml.org,2002:"

# The YAML 1.2 core schema (yaml.org/spec/1.2.2, 10.3.2), in resolution order: int before float.
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


class _Loader(_SafeLoader):  # type: ignore[misc,valid-type]
    """The safe loader with the YAML 1.2 core schema's implicit resolvers instead of YAML 1.1's."""

    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}


for _tag, _regexp, _first in (
        ("bool", re.compile("^(?:" + "|".join(_BOOL) + ")$"), "tTfF"),
        ("int", _INT, "-+0123456789"),
        ("float", _FLOAT, "-+.0123456789"),
        ("null", _NULL, ["~", "n", "N", ""]),
        ("merge", re.compile(r"^(?:<<)$"), "<")):
    _Loader.add_implicit_resolver(_TAG + _tag, _regexp, list(_first))


def _core_value(tag: str, text: str) -> Any:
    """A plain value of the YAML 1.2 core schema; ValueError (said plainly) when the text is not one."""
    if tag == _TAG + "null":
        return None
    if tag == _TAG + "bool":
        if text not in _BOOL:
            raise ValueError("expected true or false")
        return _BOOL[text]
    if tag == _TAG + "int":
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)  # `0777` is 777: a leading zero is no octal in YAML 1.2
    if text.lstrip("+-").lower() in (".inf", ".nan"):
        return float(text.replace(".", "", 1))
    return float(text)
_PLAIN_SCALARS = {_TAG + t for t in ("str", "int", "float", "bool", "null")}
# YAML 1.1 reads 2026-10-06 as a date; the process language has no date values, so keep the text.
_TEXT_SCALARS = {_TAG + "timestamp"}
# What YAML 1.1 forbids in a stream (a pure-Python scan, because libyaml reports a byte offset).
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

Path = tuple[str | int, ...]


class YamlSourceError(ValueError):
    def __init__(self, message: str, line: int = 1, column: int = 1):
        self.message, self.line, self.column = message, line, column
        super().__init__(f"{line}:{column}: {message}")


class Located:
    """A parsed document plus a map from value path to its (line, column)."""

    def __init__(self, value: Any, marks: dict[Path, tuple[int, int]], key_marks: dict[Path, tuple[int, int]]):
        self.value = value
        self._marks = marks
        self._key_marks = key_marks

    def where(self, path: Path, key: bool = False) -> tuple[int, int]:
        """Position of the value at path (or of its key); the nearest known parent otherwise."""
        probe = tuple(path)
        while True:
            if key and probe in self._key_marks:
                return self._key_marks[probe]
            if probe in self._marks:
                return self._marks[probe]
            if not probe:
                return (1, 1)
            probe = probe[:-1]


def _pos(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _syntax_error(exc: yaml.YAMLError, text: str) -> YamlSourceError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or exc.context or "not valid YAML"
        if exc.context and problem.startswith("but "):  # libyaml: "expected a single document …, but found …"
            problem = f"{exc.context}, {problem}"
        return YamlSourceError(f"not valid YAML: {problem}", line, col)
    if isinstance(exc, yaml.reader.ReaderError):
        bad = _NOT_PRINTABLE.search(text)
        if bad:
            return YamlSourceError(
                f"not valid YAML: control character U+{ord(bad.group()):04X} is not allowed (a binary file?)",
                *_line_col(text, bad.start()))
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return YamlSourceError(f"not valid YAML: {first}")


def _check_depth(text: str) -> None:
    """Walk the event stream (iterative, no recursion) and refuse documents nested too deeply."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                raise YamlSourceError(f"nested deeper than {MAX_DEPTH} levels", mark.line + 1, mark.column + 1)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _measure(root: yaml.Node, loader: yaml.SafeLoader) -> dict[int, int]:
    """Refuse a document that expands (through aliases) past MAX_NODES values or MAX_DEPTH levels.

    Sizes are counted once per node, not once per use, so an alias bomb is caught in microseconds,
    at the smallest value that is too big, before anything is built. A recursive alias
    (`&a [*a]`) is caught by the depth bound. Returns, per mapping with merge keys, how many of its
    (flattened) entries came from `<<`: those may be overridden, the written ones may not repeat.
    """
    memo: dict[int, tuple[int, int]] = {}  # id(node) -> (values once expanded, levels below it)
    merged: dict[int, int] = {}

    def walk(node: yaml.Node, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise YamlSourceError(f"nested deeper than {MAX_DEPTH} levels", *_pos(node))
        known = memo.get(id(node))
        if known is not None:
            if depth + known[1] > MAX_DEPTH:
                raise YamlSourceError(f"nested deeper than {MAX_DEPTH} levels (through an alias)", *_pos(node))
            return known
        if isinstance(node, yaml.MappingNode):
            written = sum(1 for key, _ in node.value if key.tag != _TAG + "merge")
            try:
                loader.flatten_mapping(node)  # `<<: *base` merge keys, copied in front of the written ones
            except yaml.YAMLError as exc:
                raise YamlSourceError(f"bad merge key: {getattr(exc, 'problem', None) or exc}", *_pos(node)) from None
            if len(node.value) > written:
                merged[id(node)] = len(node.value) - written
            children = [value for _, value in node.value]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        size, height = 1, 0
        for child in children:
            child_size, child_height = walk(child, depth + 1)
            size += child_size
            height = max(height, child_height + 1)
            if size > MAX_NODES:
                raise YamlSourceError(f"the document expands to more than {MAX_NODES} values (alias bomb?)",
                                      *_pos(node))
        memo[id(node)] = (size, height)
        return size, height

    walk(root, 0)
    return merged


def _scalar(node: yaml.ScalarNode) -> Any:
    if node.tag in _TEXT_SCALARS:
        return node.value
    if node.tag not in _PLAIN_SCALARS:
        raise YamlSourceError(f"unsupported tag '{node.tag.replace(_TAG, '!!')}'; "
                              "a process file uses plain YAML values only", *_pos(node))
    if node.tag == _TAG + "str":
        return node.value
    try:
        return _core_value(node.tag, node.value)
    except (ValueError, OverflowError) as exc:
        raise YamlSourceError(f"bad value '{node.value[:40]}': {str(exc).splitlines()[0]}", *_pos(node)) from None


def load_located(text: str) -> Located:
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_FILE_BYTES:
        raise YamlSourceError(
            f"file too large ({size / 1e6:.1f} MB); a process file may be at most {MAX_FILE_BYTES // 1_000_000} MB"
        )
    try:
        _check_depth(text)
    except yaml.YAMLError as exc:
        # Newer PyYAML refuses deep flow nesting itself, while scanning ahead: report our own limit
        # at the same place whichever PyYAML is installed.
        mark = getattr(exc, "problem_mark", None)
        if mark is not None and "nesting depth" in str(getattr(exc, "problem", "")):
            try:  # the text before PyYAML's own limit is shallow enough for it, and deep enough for ours
                _check_depth(text[:mark.index])
            except YamlSourceError as ours:
                raise ours from None
            except yaml.YAMLError:
                pass
        raise _syntax_error(exc, text) from None
    loader = _Loader(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise _syntax_error(exc, text) from None
        if root is None:
            raise YamlSourceError("the file is empty; expected a mapping with name, steps, …")
        merged = _measure(root, loader)
        marks: dict[Path, tuple[int, int]] = {}
        key_marks: dict[Path, tuple[int, int]] = {}
        budget = [MAX_NODES]

        def build(node: yaml.Node, path: Path, depth: int) -> Any:
            # A backstop: _measure has already refused anything this large or deep.
            budget[0] -= 1
            if budget[0] < 0:
                raise YamlSourceError(f"the document expands to more than {MAX_NODES} values (alias bomb?)",
                                      *_pos(node))
            if depth > MAX_DEPTH:
                raise YamlSourceError(f"nested deeper than {MAX_DEPTH} levels", *_pos(node))
            marks[path] = _pos(node)
            if isinstance(node, yaml.MappingNode):
                if node.tag != _TAG + "map":
                    raise YamlSourceError(f"unsupported tag '{node.tag.replace(_TAG, '!!')}'; "
                                          "a process file uses plain mappings", *_pos(node))
                out: dict[str, Any] = {}
                inherited = merged.get(id(node), 0)
                written: set[str] = set()
                for index, (key_node, value_node) in enumerate(node.value):
                    pos = _pos(key_node)
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _TAG + "null" or (
                            key_node.tag not in _PLAIN_SCALARS | _TEXT_SCALARS):
                        raise YamlSourceError("a mapping key must be a plain word", *pos)
                    # The key as written: `on:` or `2026-01-01:` stay text (YAML 1.1 would make them
                    # true or a date), which is what a designer naming a field means.
                    key = key_node.value
                    # A key given by `<<: *base` may be overridden (later wins, as YAML says);
                    # a key written twice in the mapping itself is a mistake.
                    if index >= inherited:
                        if key in written:
                            raise YamlSourceError(f"duplicate key '{key}'", *pos)
                        written.add(key)
                    key_marks[path + (key,)] = pos
                    out[key] = build(value_node, path + (key,), depth + 1)
                return out
            if isinstance(node, yaml.SequenceNode):
                if node.tag != _TAG + "seq":
                    raise YamlSourceError(f"unsupported tag '{node.tag.replace(_TAG, '!!')}'; "
                                          "a process file uses plain lists", *_pos(node))
                return [build(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
            return _scalar(node)  # type: ignore[arg-type]

        try:
            return Located(build(root, (), 0), marks, key_marks)
        except RecursionError:
            raise YamlSourceError(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
