"""The core-2 contract: its facts (`tools`) and its JSON Schemas with the checks built on them (`validation`).

`from studio import contract` gives both: `contract.TOOLS`, `contract.argument_issues(...)`, and so on.
"""

from __future__ import annotations

from .tools import (
    BASE_URI,
    CHECK,
    CODES,
    DECISIONS,
    ENVELOPE_NOTE,
    MESSAGES,
    NOTE_REQUIRED,
    PARALLEL,
    PROFILES,
    PROTOCOL,
    TOOL_DESCRIPTIONS,
    TOOL_NAMES,
    TOOLS,
    VERSION,
    WRITE_TOOLS,
    Code,
    Profile,
    internal_error,
    tool_description,
)
from .validation import (
    SCHEMA_DIR,
    argument_issues,
    assert_valid_result,
    find_schema_dir,
    index,
    inlined,
    result_errors,
    schema,
    validator,
)
from .validation import (
    _registry as _registry,  # the test suite checks that no `$ref` is ever fetched
)

__all__ = [
    "BASE_URI",
    "CHECK",
    "CODES",
    "DECISIONS",
    "ENVELOPE_NOTE",
    "MESSAGES",
    "NOTE_REQUIRED",
    "PARALLEL",
    "PROFILES",
    "PROTOCOL",
    "SCHEMA_DIR",
    "TOOLS",
    "TOOL_DESCRIPTIONS",
    "TOOL_NAMES",
    "VERSION",
    "WRITE_TOOLS",
    "Code",
    "Profile",
    "argument_issues",
    "assert_valid_result",
    "find_schema_dir",
    "index",
    "inlined",
    "internal_error",
    "result_errors",
    "schema",
    "tool_description",
    "validator",
]
