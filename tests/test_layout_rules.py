"""The layout's rules, checked on the source (issue 10, "grep-level facts"), so they stay true.

Each rule reads the syntax trees of `studio/` and names every place that breaks it:

- only `studio/engine/machine.py` assigns a step's state;
- a contract fact (protocol version, the tool list, a decision set, the profile names, the failure codes,
  the internal-error envelope) is spelt out in `studio/contract/tools.py` alone;
- no `ctx` dict carries a call's context (typed records do);
- nothing is forced onto a frozen model (`object.__setattr__`);
- no `assert` in the package: `python -O` strips them, so a check in a request path must raise;
- no import of the package's own modules inside `try: ... except ImportError` (it hides real bugs;
  optional third-party extras may be guarded);
- the layers import only downwards (docs/architecture.md).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from studio.contract import CODES, DECISIONS, PROFILES, TOOLS, VERSION

PACKAGE = Path(__file__).resolve().parent.parent / "studio"
CONTRACT_FACTS = "contract/tools.py"


@functools.cache
def _modules() -> dict[str, ast.Module]:
    """Every module of the package by its path under studio/ (posix)."""
    return {path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"), str(path))
            for path in sorted(PACKAGE.rglob("*.py"))}


def _where(module: str, node: ast.AST) -> str:
    return f"studio/{module}:{getattr(node, 'lineno', '?')}"


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring constants (prose may name the contract's facts)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings(tree: ast.Module) -> Iterator[ast.Constant]:
    """String constants of code (f-string parts included), not docstrings."""
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            yield node


def _collections(tree: ast.Module) -> Iterator[tuple[ast.AST, set[str]]]:
    """Literal collections (list, tuple, set, dict keys) and the strings among their elements."""
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            elements = node.elts
        elif isinstance(node, ast.Dict):
            elements = [k for k in node.keys if k is not None]
        else:
            continue
        texts = {e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if texts:
            yield node, texts


# --- state changes ---------------------------------------------------------------------------------------

def _state_assignments(tree: ast.Module) -> Iterator[ast.AST]:
    """`x.state = ...` (not `self.state`, a widget's own attribute), `x.state += ...`, `setattr(x, "state", ...)`."""
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "state"):
            yield node
        for target in targets:
            for part in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
                if (isinstance(part, ast.Attribute) and part.attr == "state"
                        and not (isinstance(part.value, ast.Name) and part.value.id == "self")):
                    yield node


def test_only_the_machine_assigns_a_step_state() -> None:
    found = [_where(module, node) for module, tree in _modules().items() if module != "engine/machine.py"
             for node in _state_assignments(tree)]
    assert found == []


def test_the_state_rule_finds_an_assignment() -> None:
    tree = ast.parse("def f(run):\n    run.steps['a'].state = 'done'\n    setattr(step, 'state', None)\n"
                     "    self.state = 1\n    counts[run.state] = 1\n    app.state.manager = m\n"
                     "    st.state, n = None, 1\n")
    assert len(list(_state_assignments(tree))) == 3


# --- contract facts --------------------------------------------------------------------------------------

def _contract_copies(module: str, tree: ast.Module) -> Iterator[str]:
    """Copies of contract facts in one module. The protocol version may be named in the contract package's
    own messages (it is the contract); a table keyed by tool or decision (the engine's dispatch table, a
    limit per tool, a colour per decision) is about them, not a copy of the list; six codes in a table are."""
    for node in _strings(tree):
        if VERSION in node.value and (module == CONTRACT_FACTS or not module.startswith("contract/")):
            yield f"{_where(module, node)} the protocol version {node.value!r}"
        if "Internal error" in node.value:
            yield f"{_where(module, node)} the internal-error message {node.value!r}"
        if node.value in PROFILES:
            yield f"{_where(module, node)} the profile name {node.value!r}"
    for node, texts in _collections(tree):
        if "internal_error" in texts and not module.endswith("__init__.py"):  # `__all__` names the function
            yield f"{_where(module, node)} the internal-error issue"
        if len(texts & set(CODES)) >= 4:
            yield f"{_where(module, node)} the failure codes {sorted(texts & set(CODES))}"
        if isinstance(node, ast.Dict):
            continue
        if len(texts & set(TOOLS)) >= 3:
            yield f"{_where(module, node)} a tool list {sorted(texts & set(TOOLS))}"
        for kind, decisions in DECISIONS.items():
            if len(texts & set(decisions)) >= 2:
                yield f"{_where(module, node)} the decisions of {kind} {sorted(texts & set(decisions))}"


def test_contract_facts_are_spelt_out_once() -> None:
    found = [copy for module, tree in _modules().items() if module != CONTRACT_FACTS
             for copy in _contract_copies(module, tree)]
    assert found == []


def test_the_contract_facts_are_where_the_rule_says() -> None:
    """The scan sees the facts in their home (so it would see a copy elsewhere)."""
    home = list(_contract_copies(CONTRACT_FACTS, _modules()[CONTRACT_FACTS]))
    for fact in ("protocol version", "internal-error message", "internal-error issue", "profile name",
                 "a tool list", "failure codes",
                 "decisions of task", "decisions of approve", "decisions of escalation"):
        assert any(fact in line for line in home), fact


# --- untyped context, frozen models, asserts, guarded imports ---------------------------------------------

def _ctx_dicts(tree: ast.Module) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ctx" for t in node.targets)
                and (isinstance(node.value, ast.Dict | ast.DictComp) or (
                    isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                    and node.value.func.id == "dict"))):
            yield node
        if isinstance(node, ast.arg | ast.AnnAssign):
            name = node.arg if isinstance(node, ast.arg) else getattr(node.target, "id", None)
            annotation = node.annotation
            if name == "ctx" and annotation is not None and "dict" in ast.unparse(annotation).lower():
                yield node


def test_no_ctx_dict() -> None:
    found = [_where(module, node) for module, tree in _modules().items() for node in _ctx_dicts(tree)]
    assert found == []


def _forced_attributes(tree: ast.Module) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__setattr__"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "object"):
            yield node


def test_nothing_forced_onto_a_frozen_model() -> None:
    found = [_where(module, node) for module, tree in _modules().items() for node in _forced_attributes(tree)]
    assert found == []


def test_no_assert_in_the_package() -> None:
    found = [_where(module, node) for module, tree in _modules().items() for node in ast.walk(tree)
             if isinstance(node, ast.Assert)]
    assert found == []


def _own_import(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name == "studio" or alias.name.startswith("studio.") for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").split(".")[0] == "studio"
    return False


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = [handler.type] if not isinstance(handler.type, ast.Tuple) else handler.type.elts
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def _guarded_own_imports(tree: ast.Module) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for statement in node.body:
                yield from (part for part in ast.walk(statement) if _own_import(part))


def test_no_own_import_guarded_by_import_error() -> None:
    found = [_where(module, node) for module, tree in _modules().items() for node in _guarded_own_imports(tree)]
    assert found == []


@pytest.mark.parametrize("source, count", [
    ("try:\n    from studio import cli_extra\nexcept ImportError:\n    pass\n", 1),
    ("try:\n    from . import extra\nexcept (ValueError, ModuleNotFoundError):\n    pass\n", 1),
    ("try:\n    import vl_convert\nexcept ImportError:\n    vl_convert = None\n", 0),
])
def test_the_import_rule_tells_own_from_optional(source: str, count: int) -> None:
    assert len(list(_guarded_own_imports(ast.parse(source)))) == count


def test_the_other_rules_find_what_they_forbid() -> None:
    tree = ast.parse("ctx = {}\ndef f(ctx: dict[str, object]) -> None:\n    object.__setattr__(m, 'version', 2)\n"
                     "    assert ctx\n")
    assert len(list(_ctx_dicts(tree))) == 2
    assert len(list(_forced_attributes(tree))) == 1
    tree = ast.parse("KINDS = ('approved', 'rejected')\nV = 'core-2'\nT = ['claim', 'renew', 'submit']\n")
    assert len(list(_contract_copies("x.py", tree))) == 3


# --- layers ----------------------------------------------------------------------------------------------

# What each layer may not import (docs/architecture.md, "Layers"): the faces sit above the engine, the
# engine above the store and the definitions, the contract at the bottom.
FACES = {"panels", "server", "sim", "notebook", "cli", "agent", "analytics", "mining"}
FORBIDDEN = {
    "contract": FACES | {"engine", "store", "definition", "render", "checks"},
    "definition": FACES | {"engine", "store", "render"},
    "checks": FACES | {"engine", "store", "definition", "render"},
    "store": FACES | {"engine", "definition", "render"},
    "render": FACES | {"engine", "store"},
    "engine": FACES | {"render"},
}


# The one upward import: the engine package hooks the notebook's pre-cell sync onto `Engine` (the engine
# module itself knows only `Engine.opened_hooks`).
COMPOSITION = {("engine/__init__.py", "notebook")}


def _imported(module: str, tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """(node, top-level name under studio/) of every import of the package's own modules."""
    package = module.split("/")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "studio" and len(parts) > 1:
                    yield node, parts[1]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                parts = base + (node.module.split(".") if node.module else [])
                names = [parts] if node.module or base else [[alias.name] for alias in node.names]
                for found in names:
                    if found:
                        yield node, found[0].removesuffix(".py")
            elif node.module == "studio":
                for alias in node.names:
                    yield node, alias.name
            elif node.module and node.module.startswith("studio."):
                yield node, node.module.split(".")[1]


def _layer(module: str) -> str:
    return module.split("/")[0].removesuffix(".py")


def test_layers_import_downwards_only() -> None:
    found = [f"{_where(module, node)} {_layer(module)} imports {name}"
             for module, tree in _modules().items()
             for node, name in _imported(module, tree)
             if name in FORBIDDEN.get(_layer(module), set()) and (module, name) not in COMPOSITION]
    assert found == []


def test_the_layer_rule_sees_relative_and_absolute_imports() -> None:
    tree = ast.parse("from ..panels import graph\nfrom studio.server import app\nimport studio.sim.runner\n"
                     "from . import machine\n")
    assert [name for _, name in _imported("engine/x.py", tree)] == ["panels", "server", "sim", "engine"]


# --- documents the code cites ------------------------------------------------------------------------------

DOC_REFERENCE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.md)\b")


def test_every_document_the_code_cites_is_in_the_repository() -> None:
    """A docstring or comment that points to a document names one that ships with the code (docs/, or a
    file beside the package such as README.md), never one outside the repository."""
    root = PACKAGE.parent
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in DOC_REFERENCE.findall(line):
                found = (root / name).is_file() or any((folder / name).is_file() for folder in path.parents) or (
                    "/" not in name and any(path.parent.rglob(name)))  # a bare name: a file of this package
                if not found:
                    missing.append(f"{path.relative_to(root)}:{number} {name}")
    assert missing == []
