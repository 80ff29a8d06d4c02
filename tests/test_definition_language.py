"""The process language as JSON Schema (for editors) and the editor's completion vocabulary."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from studio.definition import load_text
from studio.definition.language import SCHEMA_FILE, process_json_schema, schema_text, vocabulary
from studio.definition.model import KINDS
from studio.directory import Directory

ROOT = Path(__file__).resolve().parent.parent
PROCESSES = sorted(p for p in (ROOT / "processes").glob("*.yaml") if p.name != "directory.yaml")
HEADER = "# yaml-language-server: $schema=../studio/schemas/process.schema.json"


def test_the_committed_schema_is_the_generated_one() -> None:
    # Regenerate with `python -m studio.definition.language` after changing studio/definition/model.py.
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text()


def test_the_schema_is_valid_2020_12_and_ships_in_the_package() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert SCHEMA_FILE.parent.parent.name == "studio"  # package data (pyproject: **/*.json)


@pytest.mark.parametrize("path", PROCESSES, ids=lambda p: p.stem)
def test_bundled_processes_name_the_schema_and_satisfy_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == HEADER
    assert (path.parent / HEADER.split("=", 1)[1]).resolve() == SCHEMA_FILE
    assert load_text(text).ok
    validator = jsonschema.Draft202012Validator(process_json_schema())
    assert list(validator.iter_errors(yaml.safe_load(text))) == []


@pytest.mark.parametrize("change, where", [
    (lambda d: d["steps"][0].update(kind="agnet"), "steps"),
    (lambda d: d["steps"][0].update(instrucions="x"), "steps"),
    (lambda d: d.update(inputs={"amount": "nmber"}), "inputs"),
    (lambda d: d["steps"][1].update(assign="nobody"), "steps"),
    (lambda d: d.update(name="Not A Name"), "name"),
])
def test_the_schema_refuses_what_the_loader_refuses(change, where: str) -> None:
    data = yaml.safe_load((ROOT / "processes" / "supplier-onboarding.yaml").read_text(encoding="utf-8"))
    broken = copy.deepcopy(data)
    change(broken)
    errors = list(jsonschema.Draft202012Validator(process_json_schema()).iter_errors(broken))
    assert errors and errors[0].absolute_path[0] == where
    assert not load_text(yaml.safe_dump(broken)).ok


def test_assign_initiator_and_field_object_form_are_accepted() -> None:
    data = {"name": "p", "inputs": {"a": {"type": "number", "minimum": 0}, "b": "email[]?"},
            "steps": [{"id": "s", "kind": "approve", "text": "Go.", "assign": "initiator", "next": "e"},
                      {"id": "e", "kind": "finish"}]}
    assert list(jsonschema.Draft202012Validator(process_json_schema()).iter_errors(data)) == []


def test_vocabulary_comes_from_the_models_and_the_directory() -> None:
    directory = Directory.load(ROOT / "processes" / "directory.yaml")
    vocab = vocabulary(directory)
    assert vocab["kinds"] == list(KINDS)
    assert vocab["step_keys"]["agent"][:2] == ["id", "kind"] and "instructions" in vocab["step_keys"]["agent"]
    assert "reject" in vocab["step_keys"]["approve"] and "reject" not in vocab["step_keys"]["task"]
    assert set(vocab["groups"]) >= {g.id for g in directory.groups} and vocab["groups"]
    assert vocab["agents"] == sorted(a.id for a in directory.agents) and vocab["agents"]
    assert vocabulary()["groups"] == [] and "string" in vocab["types"]
