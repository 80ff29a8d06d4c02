"""Structured logging for the tool server: one JSON line per event on stderr, never a stack trace.

Every line is a JSON object with `ts` and `event`. A tool call logs `tool, caller, ok, code, ms`;
library warnings (uvicorn, mcp) go through `JsonFormatter`, which drops tracebacks and exception
text on purpose: they can carry file system paths and argument values (tokens).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import warnings
from datetime import UTC, datetime
from typing import Any, TextIO

__all__ = ["CallLog", "JsonFormatter", "install_json_logging"]

# Loggers whose records could otherwise print tracebacks through logging.lastResort or uvicorn's handlers.
_LIBRARY_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "mcp", "studio.server")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class CallLog:
    """Writes one JSON line per event to a stream (stderr by default); `enabled=False` makes it silent."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True):
        self._stream = stream
        self.enabled = enabled
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        if not self.enabled:
            return
        line = json.dumps({"ts": _now(), "event": event, **fields}, default=str, separators=(",", ":"))
        stream = self._stream or sys.stderr  # looked up late: a notebook kernel swaps sys.stderr
        with self._lock:
            try:
                stream.write(line + "\n")
                stream.flush()
            except (OSError, ValueError):  # a closed stderr must never break a tool call
                pass

    def call(self, tool: str, caller: str | None, envelope: dict[str, Any] | None, started: float,
             transport: str) -> None:
        error = (envelope or {}).get("error") or {}
        self.write("call", tool=tool, caller=caller, ok=bool(envelope and envelope.get("ok")),
                   code=error.get("code"), ms=round((time.perf_counter() - started) * 1000, 2), transport=transport)


class JsonFormatter(logging.Formatter):
    """A log record as one JSON line: level, logger, message, and at most the exception's type name."""

    def format(self, record: logging.LogRecord) -> str:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string in a library must not raise here
            message = str(record.msg)
        entry: dict[str, Any] = {"ts": _now(), "event": "log", "level": record.levelname.lower(),
                                 "logger": record.name, "message": message[:500]}
        if record.exc_info and record.exc_info[0] is not None:
            entry["exception"] = record.exc_info[0].__name__  # the type only: no traceback, no paths
        return json.dumps(entry, default=str, separators=(",", ":"))


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """A Python warning as one JSON line: its category and text, not the file and line it came from."""
    CallLog().write("log", level="warning", logger="py.warnings", category=category.__name__,
                    message=str(message)[:500])


_installed_lock = threading.Lock()
_installed: logging.Handler | None = None


def install_json_logging(level: int = logging.WARNING, *, engine: bool = False) -> logging.Handler:
    """Route the server's and its libraries' log records to stderr as JSON lines (idempotent).

    `engine=True` (the `studio serve` process) also takes over `studio.engine`, whose internal-error
    records carry tracebacks; a notebook's `studio.serve` leaves the kernel's own engine logging alone.
    """
    global _installed
    with _installed_lock:
        if _installed is None:
            handler = logging.StreamHandler()  # resolves sys.stderr now; fine for a server process
            handler.setFormatter(JsonFormatter())
            _installed = handler
        if engine:  # the server process: Python warnings print "path:line: ..." unless rerouted
            warnings.showwarning = _show_warning
        for name in (*_LIBRARY_LOGGERS, *(("studio.engine",) if engine else ())):
            logger = logging.getLogger(name)
            for existing in list(logger.handlers):
                if existing is not _installed:
                    logger.removeHandler(existing)
            if _installed not in logger.handlers:
                logger.addHandler(_installed)
            logger.setLevel(level)
            logger.propagate = False
        return _installed
