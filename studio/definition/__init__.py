"""The process language: YAML -> pydantic `Process`, field notation, lint, located diagnostics."""

from .diagnostics import DefinitionError, Diagnostic
from .fields import FieldSpec, object_schema, parse_field, parse_fields, value_issues
from .loader import LoadResult, load, load_file, load_text
from .model import (
    AgentStep,
    ApproveStep,
    Assignment,
    CheckRule,
    CheckUse,
    FinishStep,
    Fork,
    Process,
    Route,
    StepBase,
    TaskStep,
    WaitForStep,
)

__all__ = [
    "AgentStep", "ApproveStep", "Assignment", "CheckRule", "CheckUse", "DefinitionError", "Diagnostic",
    "FieldSpec", "FinishStep", "Fork", "LoadResult", "Process", "Route", "StepBase", "TaskStep",
    "WaitForStep", "load", "load_file", "load_text", "object_schema", "parse_field", "parse_fields",
    "value_issues",
]
