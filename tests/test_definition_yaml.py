"""The safe YAML layer: hostile or broken files get one clear, located error, fast, never a traceback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from studio.definition import load_file, load_text
from studio.definition.yamlsrc import MAX_DEPTH, MAX_NODES, YamlSourceError, load_located

FILE = "processes/x.yaml"
TAIL = "steps:\n  - {id: done, kind: finish}\n"


def only_error(text: str) -> str:
    result = load_text(text, FILE)
    assert result.process is None
    [diag] = result.diagnostics
    assert diag.severity == "error"
    return str(diag)


def alias_bomb(levels: int = 9) -> str:
    """The billion laughs: 10 ** levels values from a few hundred bytes."""
    text = "name: x\nlol: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    prev = "a"
    for name in "bcdefghijklmnop"[:levels]:
        text += f"{name}: &{name} [" + ", ".join(["*" + prev] * 10) + "]\n"
        prev = name
    return text + TAIL


@pytest.mark.parametrize("text, expected", [
    pytest.param("", "processes/x.yaml:1:1: the file is empty; expected a mapping with name, steps, …", id="empty"),
    pytest.param("   \n\n", "processes/x.yaml:1:1: the file is empty; expected a mapping with name, steps, …",
                 id="blank"),
    pytest.param("# only a comment\n", "processes/x.yaml:1:1: the file is empty; expected a mapping with name, "
                 "steps, …", id="comment-only"),
    pytest.param("- a\n- b\n", "processes/x.yaml:1:1: expected a mapping with name, steps, … at the top; got a list",
                 id="list"),
    pytest.param("hello\n", "processes/x.yaml:1:1: expected a mapping with name, steps, … at the top; got a single "
                 "value", id="scalar"),
    pytest.param("~\n", "processes/x.yaml:1:1: expected a mapping with name, steps, … at the top; got a single "
                 "value", id="null"),
    pytest.param("name: x\nsteps:\n  - {id: done, kind: finish\n",
                 "processes/x.yaml:4:1: not valid YAML: did not find expected ',' or '}'", id="unclosed-flow"),
    pytest.param("name: x\n  steps: 1\n",
                 "processes/x.yaml:2:8: not valid YAML: mapping values are not allowed in this context",
                 id="bad-indent"),
    pytest.param("name: x\nsteps:\n\t- {id: done, kind: finish}\n",
                 "processes/x.yaml:3:1: not valid YAML: found character that cannot start any token", id="tab"),
    pytest.param("name: \"x\n" + TAIL, "processes/x.yaml:4:1: not valid YAML: found unexpected end of stream",
                 id="unclosed-quote"),
    pytest.param("name: x\n" + TAIL + "---\nname: y\n", "processes/x.yaml:4:1: not valid YAML: expected a single "
                 "document in the stream, but found another document", id="two-documents"),
    pytest.param("name: x\nname: y\n" + TAIL, "processes/x.yaml:2:1: duplicate key 'name'", id="duplicate-key"),
    pytest.param("name: x\nsteps:\n  - id: done\n    kind: finish\n    kind: finish\n",
                 "processes/x.yaml:5:5: duplicate key 'kind'", id="duplicate-nested-key"),
    pytest.param("name: x\n? [a, b]\n: c\n" + TAIL, "processes/x.yaml:2:3: a mapping key must be a plain word",
                 id="list-key"),
    pytest.param("name: x\n~: y\n" + TAIL, "processes/x.yaml:2:1: a mapping key must be a plain word",
                 id="null-key"),
    pytest.param("name: !!python/object/apply:os.system ['echo hi']\n" + TAIL,
                 "processes/x.yaml:1:7: unsupported tag '!!python/object/apply:os.system'; a process file uses "
                 "plain lists", id="python-apply"),
    pytest.param("name: !!python/name:os.system\n" + TAIL, "processes/x.yaml:1:7: unsupported tag "
                 "'!!python/name:os.system'; a process file uses plain YAML values only", id="python-name"),
    pytest.param("name: !custom x\n" + TAIL, "processes/x.yaml:1:7: unsupported tag '!custom'; a process file "
                 "uses plain YAML values only", id="local-tag"),
    pytest.param("name: x\ndescription: !!binary aGVsbG8=\n" + TAIL, "processes/x.yaml:2:14: unsupported tag "
                 "'!!binary'; a process file uses plain YAML values only", id="binary"),
    pytest.param("name: x\ninputs: !!set {a: null}\n" + TAIL, "processes/x.yaml:2:9: unsupported tag '!!set'; "
                 "a process file uses plain mappings", id="set"),
    pytest.param("name: !!int x\n" + TAIL, "processes/x.yaml:1:7: bad value 'x': invalid literal for int() with "
                 "base 10: 'x'", id="bad-explicit-int"),
    pytest.param("name: x\nsteps:\n  - {<<: [1], id: b}\n", "processes/x.yaml:3:5: bad merge key: expected a "
                 "mapping for merging, but found scalar", id="bad-merge"),
    pytest.param("name: x\u0000y\n" + TAIL, "processes/x.yaml:1:8: not valid YAML: control character U+0000 is "
                 "not allowed (a binary file?)", id="nul-character"),
    pytest.param("name: x\nsteps: &a [*a]\n", "processes/x.yaml:2:8: nested deeper than 64 levels",
                 id="recursive-alias"),
])
def test_broken_yaml_gets_one_located_error(text: str, expected: str) -> None:
    assert only_error(text) == expected


def test_python_tags_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"name: !!python/object/apply:os.system ['touch {marker}']\n" + TAIL
    assert "unsupported tag" in only_error(text)
    assert not marker.exists()


def test_alias_bomb_is_refused_fast_and_clearly() -> None:
    started = time.perf_counter()
    message = only_error(alias_bomb())
    elapsed = time.perf_counter() - started
    assert message == f"processes/x.yaml:7:4: the document expands to more than {MAX_NODES} values (alias bomb?)"
    assert elapsed < 2.0


def test_small_alias_expansion_is_fine() -> None:
    # Two more levels (1,111 values) is legitimate reuse, not a bomb; it only fails as a process.
    result = load_text(alias_bomb(2), FILE)
    assert [str(d) for d in result.diagnostics][0].startswith("processes/x.yaml:2:1: lol: unknown field 'lol'")
    assert not any("alias bomb" in d.message for d in result.diagnostics)


@pytest.mark.parametrize("nested, expected", [
    ("[" * 5000 + "]" * 5000, "processes/x.yaml:2:71: nested deeper than 64 levels"),
    ("{a: " * 5000 + "1" + "}" * 5000, "processes/x.yaml:2:8: nested deeper than 64 levels"),
    ("[" * 100 + "]" * 100, "processes/x.yaml:2:71: nested deeper than 64 levels"),
], ids=["flow-lists", "flow-mappings", "just-too-deep"])
def test_deep_nesting_is_refused_fast_and_clearly(nested: str, expected: str) -> None:
    started = time.perf_counter()
    message = only_error("name: x\nsteps: " + nested + "\n")
    assert time.perf_counter() - started < 2.0
    if "{a:" in nested:  # flow mappings: the 64th level opens at a column that depends on the form
        assert message.startswith("processes/x.yaml:2:") and message.endswith(": nested deeper than 64 levels")
    else:
        assert message == expected


def test_deep_block_nesting_is_refused() -> None:
    text = "name: x\nsteps:\n" + "".join("  " * i + "- \n" for i in range(1, 200))
    message = only_error(text)
    assert message.endswith(f"nested deeper than {MAX_DEPTH} levels") and message.startswith("processes/x.yaml:")


def test_alias_chain_deeper_than_the_limit_is_refused() -> None:
    text = "name: x\na0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 2000)) + TAIL
    started = time.perf_counter()
    message = only_error(text)
    assert time.perf_counter() - started < 2.0
    assert message.endswith("nested deeper than 64 levels (through an alias)")


def test_five_megabytes_are_refused_fast(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("name: big\nbody: |\n" + ("  " + "x" * 97 + "\n") * 53_000 + TAIL)
    assert path.stat().st_size > 5_000_000
    started = time.perf_counter()
    result = load_file(path)
    assert time.perf_counter() - started < 1.0
    assert [str(d) for d in result.diagnostics] == [
        f"{path}:1:1: file too large (5.3 MB); a process file may be at most 1 MB"]
    # The same limit holds for text given directly (the Author panel, publish(text=…)).
    started = time.perf_counter()
    assert only_error(path.read_text()) == "processes/x.yaml:1:1: file too large (5.3 MB); a process file may " \
                                           "be at most 1 MB"
    assert time.perf_counter() - started < 1.0


def test_a_file_just_under_the_limit_loads() -> None:
    text = "name: big\nbody: |\n" + ("  " + "x" * 97 + "\n") * 9_000 + TAIL
    assert 800_000 < len(text) < 1_000_000
    started = time.perf_counter()
    result = load_text(text, FILE)
    assert result.ok and time.perf_counter() - started < 5.0


@pytest.mark.parametrize("data, expected", [
    (b"\xff\xfe\x00b\x00i\x00n", "1:1: not UTF-8 text (byte 0xff); save the file as UTF-8"),
    (b"name: caf\xe9\n", "1:10: not UTF-8 text (byte 0xe9); save the file as UTF-8"),
    (b"name: x\ndescription: \xc3\xa9t\xe9\n", "2:16: not UTF-8 text (byte 0xe9); save the file as UTF-8"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "1:1: not UTF-8 text (byte 0x89); save the file as UTF-8"),
    (b"name: x\x00\x01\n", "1:8: not valid YAML: control character U+0000 is not allowed (a binary file?)"),
], ids=["utf16", "latin1", "latin1-after-utf8", "png", "nul"])
def test_binary_and_non_utf8_files(tmp_path: Path, data: bytes, expected: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(data)
    assert [str(d) for d in load_file(path).diagnostics] == [f"{path}:{expected}"]


def test_unreadable_paths(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert [str(d) for d in load_file(missing).diagnostics] == [
        f"{missing}:1:1: cannot read: No such file or directory"]
    assert [str(d) for d in load_file(tmp_path).diagnostics] == [f"{tmp_path}:1:1: cannot read: Is a directory"]


def test_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes("\ufeffname: X\r\nsteps:\r\n  - {id: done, kind: finish}\r\n".encode())
    # A BOM and Windows line ends change nothing, not even the columns.
    assert [str(d) for d in load_file(path).diagnostics] == [
        f"{path}:1:7: name: expected lower-case letters, digits and '-' (like supplier-onboarding)"]
    path.write_bytes("\ufeffname: x\r\nsteps:\r\n  - {id: done, kind: fnish}\r\n".encode())
    assert [str(d) for d in load_file(path).diagnostics] == [
        f"{path}:3:22: steps[0].kind: unknown kind 'fnish' (did you mean 'finish'?); expected one of agent, task, "
        "approve, wait_for, finish"]


def test_keys_are_taken_as_written_and_dates_stay_text() -> None:
    result = load_text("name: x\ninputs:\n  on: string\n  yes: number\n  '12': string\nsteps:\n"
                       "  - {id: done, kind: finish, outcome: 2026-10-06}\n", FILE)
    assert [str(d) for d in result.diagnostics] == [
        "processes/x.yaml:5:9: inputs.12: '12' is not a field name; expected a letter or '_', then letters, digits, "
        "'_' or '-' (at most 64)"]
    result = load_text("name: x\ninputs:\n  on: string\n  yes: number\n  off: {type: string, enum: [2026-01-01]}\n"
                       "steps:\n  - {id: done, kind: finish, outcome: 2026-10-06}\n", FILE)
    assert result.ok and result.process is not None
    assert list(result.process.inputs) == ["on", "yes", "off"]
    assert result.process.inputs["off"] == {"type": "string", "enum": ["2026-01-01"]}
    assert result.process.steps[0].outcome == "2026-10-06"  # type: ignore[union-attr]


def test_anchors_aliases_and_merge_keys_work() -> None:
    text = """\
name: reuse
steps:
  - &review {id: legal, kind: approve, text: Review., assign: &finance {group: g_finance}, next: finance}
  - {<<: *review, id: finance, next: done}
  - {id: done, kind: finish}
  - {id: other, kind: task, text: Other., assign: *finance, next: done}
"""
    result = load_text(text, FILE)
    assert result.process is not None, [str(d) for d in result.diagnostics]
    finance = result.process.step("finance")
    assert (finance.kind, finance.text, finance.next) == ("approve", "Review.", "done")  # type: ignore[attr-defined]
    assert result.process.step("other").assign.group == "g_finance"  # type: ignore[attr-defined]
    # Overriding a merged key is fine; writing a key twice is still a duplicate.
    twice = text.replace("{<<: *review, id: finance, next: done}", "{<<: *review, id: finance, id: x, next: done}")
    assert only_error(twice) == "processes/x.yaml:4:32: duplicate key 'id'"


def test_explicit_plain_tags_are_fine() -> None:
    result = load_text("name: !!str x\ndescription: !!str 12\n" + TAIL, FILE)
    assert result.ok and result.process is not None and result.process.description == "12"


def test_located_positions() -> None:
    doc = load_located("name: x\nsteps:\n  - id: a\n    next: [b, c]\n")
    assert doc.value == {"name": "x", "steps": [{"id": "a", "next": ["b", "c"]}]}
    assert doc.where(("name",)) == (1, 7)
    assert doc.where(("name",), key=True) == (1, 1)
    assert doc.where(("steps", 0)) == (3, 5)
    assert doc.where(("steps", 0, "next", 1)) == (4, 15)
    assert doc.where(("steps", 0, "missing", 3)) == (3, 5)  # the nearest known parent
    assert doc.where(("nothing",)) == (1, 1)


def test_yaml_source_error_carries_its_position() -> None:
    with pytest.raises(YamlSourceError) as info:
        load_located("a: 1\na: 2\n")
    assert (info.value.line, info.value.column, info.value.message) == (2, 1, "duplicate key 'a'")
    assert str(info.value) == "2:1: duplicate key 'a'"
