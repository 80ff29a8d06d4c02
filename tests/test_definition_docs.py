"""docs/process-language.md stays true: its examples load, and its error messages are the real ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from studio.definition import load_file, load_text
from studio.definition.fields import BASE_TYPES, KEYWORDS
from studio.definition.model import KINDS, STEP_CLASSES, Assignment, CheckRule, Process, Route

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "process-language.md"
TEXT = DOC.read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", TEXT, re.S)
FILE = "processes/example.yaml"
# Inline code spans outside the fenced blocks: where the reference names things.
SPANS = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", TEXT, flags=re.S))


def _pairs() -> list[tuple[int, str, list[str] | None]]:
    """(index, yaml, expected lines or None): a yaml block followed by a text block is an example output."""
    out = []
    for i, (lang, body) in enumerate(BLOCKS):
        if lang != "yaml":
            continue
        following = BLOCKS[i + 1] if i + 1 < len(BLOCKS) else None
        expected = following[1].strip().splitlines() if following and following[0] == "text" else None
        out.append((i, body, expected))
    return out


EXAMPLES = [(i, body, expected) for i, body, expected in _pairs() if expected is not None]
COMPLETE = [(i, body) for i, body, expected in _pairs() if expected is None and body.startswith("name:")]


def test_the_doc_has_examples() -> None:
    assert len(EXAMPLES) >= 12 and len(COMPLETE) >= 2


@pytest.mark.parametrize("index, body, expected", EXAMPLES, ids=[f"block{i}" for i, _, _ in EXAMPLES])
def test_documented_messages_are_the_real_ones(index: int, body: str, expected: list[str]) -> None:
    assert [str(d) for d in load_text(body, FILE).diagnostics] == expected


@pytest.mark.parametrize("index, body", COMPLETE, ids=[f"block{i}" for i, _ in COMPLETE])
def test_complete_examples_are_valid_without_warnings(index: int, body: str) -> None:
    result = load_text(body, FILE)
    assert result.ok and result.diagnostics == [], [str(d) for d in result.diagnostics]


def test_every_field_and_kind_is_documented() -> None:
    fields = set(Process.model_fields) | set(Route.model_fields) | set(Assignment.model_fields) | set(
        CheckRule.model_fields) | {"all", "use"}
    for cls in STEP_CLASSES.values():
        fields |= set(cls.model_fields)
    fields.discard("initiator")  # written as the word `initiator`, not as a key
    for name in sorted(fields | set(KINDS) | set(BASE_TYPES) | set(KEYWORDS)):
        # in code: `name`, `name: …`, `{all: [a, b]}`
        word = re.compile(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])")
        assert any(word.search(span) for span in SPANS), name


def test_the_table_of_broken_files(tmp_path: Path) -> None:
    """Each row of "Not a process at all" is what that file really gets."""
    rows = dict(re.findall(r"^\| ([^|]+?) \| `(processes/\S+:\d+:\d+: [^`]+)`", TEXT, re.M))
    processes = tmp_path / "processes"
    processes.mkdir()
    (processes / "empty").mkdir()
    tail = "steps:\n  - {id: done, kind: finish}\n"
    bomb = "name: x\nlol: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for level, prev in zip("bcdefghi", "abcdefgh", strict=True):
        bomb += f"{level}: &{level} [" + ", ".join(["*" + prev] * 10) + "]\n"
    files: dict[str, bytes] = {
        "empty": b"",
        "a list (`- a`)": b"- a\n",
        "one value (`hello`)": b"hello\n",
        "two documents (`---`)": ("name: x\n" + tail + "---\nname: y\n").encode(),
        "a tag (`name: !!python/name:os.system`)": ("name: !!python/name:os.system\n" + tail).encode(),
        "saved as Latin-1": "name: café\n".encode("latin-1"),
        "a binary file": b"\xff\xd8\xff\xe0\x00\x10JFIF",
        "over 1 MB": ("name: big\nbody: |\n" + ("  " + "x" * 97 + "\n") * 53_000 + tail).encode(),
        "an alias bomb": (bomb + tail).encode(),
        "`[[[[…`": ("name: x\nsteps: " + "[" * 1000 + "]" * 1000 + "\n").encode(),
    }
    assert set(files) | {"a folder with no process file", "a file that is not there"} == set(rows)
    for row, content in files.items():
        path = processes / "example.yaml"
        path.write_bytes(content)
        [diag] = load_file(path).diagnostics
        assert str(diag).replace(str(tmp_path) + "/", "") == rows[row], row
    [diag] = load_file(processes / "nope.yaml").diagnostics
    assert str(diag).replace(str(tmp_path) + "/", "") == rows["a file that is not there"]
    assert rows["a folder with no process file"] == "processes/empty:1:1: no process files (*.yaml, *.yml) in " \
                                                    "this folder"


def test_the_documented_json_schema_is_the_generated_one() -> None:
    import json

    from studio.definition.schemas import process_schemas

    [documented] = [json.loads(body) for lang, body in BLOCKS if lang == "json"]
    complete = load_text(COMPLETE[0][1], FILE).process
    assert complete is not None and complete.name == "supplier-onboarding"
    assert process_schemas(complete)["inputs"] == documented
