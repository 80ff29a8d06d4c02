"""Safe YAML -> plain Python, remembering where every value stood (line, column; 1-based).

Uses PyYAML's SafeLoader to compose nodes (no Python object tags), then builds the value
ourselves so that duplicate keys are refused and alias expansion is bounded (billion laughs).
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_FILE_BYTES = 1_000_000
MAX_NODES = 200_000
MAX_DEPTH = 64

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


def _scalar(node: yaml.ScalarNode, loader: yaml.SafeLoader) -> Any:
    return loader.construct_object(node, deep=True)


def load_located(text: str) -> Located:
    if len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
        raise YamlSourceError(
            f"file too large ({len(text.encode('utf-8', errors='replace')) / 1e6:.1f} MB); "
            f"a process file may be at most {MAX_FILE_BYTES // 1_000_000} MB"
        )
    loader = yaml.SafeLoader(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            problem = exc.problem or exc.context or "not valid YAML"
            raise YamlSourceError(f"not valid YAML: {problem}", line, col) from None
        except yaml.YAMLError as exc:
            raise YamlSourceError(f"not valid YAML: {exc}") from None
        if root is None:
            raise YamlSourceError("the file is empty; expected a mapping with name, steps, …")
        marks: dict[Path, tuple[int, int]] = {}
        key_marks: dict[Path, tuple[int, int]] = {}
        budget = [MAX_NODES]

        def build(node: yaml.Node, path: Path, depth: int) -> Any:
            budget[0] -= 1
            if budget[0] < 0:
                raise YamlSourceError(
                    f"the document expands to more than {MAX_NODES} values (alias bomb?)",
                    node.start_mark.line + 1, node.start_mark.column + 1)
            if depth > MAX_DEPTH:
                raise YamlSourceError(f"nested deeper than {MAX_DEPTH} levels",
                                      node.start_mark.line + 1, node.start_mark.column + 1)
            marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
            if isinstance(node, yaml.MappingNode):
                loader.flatten_mapping(node)
                out: dict[str, Any] = {}
                for key_node, value_node in node.value:
                    key = _scalar(key_node, loader) if isinstance(key_node, yaml.ScalarNode) else None
                    pos = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                    if not isinstance(key, str | int | float | bool) or key is None:
                        raise YamlSourceError("a mapping key must be a plain word", *pos)
                    key = str(key)
                    if key in out:
                        raise YamlSourceError(f"duplicate key '{key}'", *pos)
                    key_marks[path + (key,)] = pos
                    out[key] = build(value_node, path + (key,), depth + 1)
                return out
            if isinstance(node, yaml.SequenceNode):
                return [build(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
            try:
                return _scalar(node, loader)
            except yaml.YAMLError as exc:
                raise YamlSourceError(f"bad value: {exc}", *marks[path]) from None

        try:
            return Located(build(root, (), 0), marks, key_marks)
        except RecursionError:
            raise YamlSourceError(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
