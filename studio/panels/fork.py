"""Forking a run after one of its events, from a panel (History's event list, Graph's replay slider): whom to
fork as, the button, and what happened. What may be forked, by whom, and how, is `engine.fork`'s to say."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as w

from .common import button, esc, issues_html
from .simulate import identity_options


class ForkControl:
    """The widgets of "fork this run here" and the call behind them; the panel lays the widgets out."""

    def __init__(self, engine: Any, *, tooltip: str):
        self.engine = engine
        self.caller = w.Dropdown(description="as", options=identity_options(engine.directory),
                                 layout=w.Layout(width="320px"))
        operators = [i.id for i in engine.directory.identities if getattr(i, "operator", False)]
        if operators:  # operators may read every run: the likeliest to be allowed
            self.caller.value = operators[0]
        self.button = button("Fork here", "warning", "code-fork", tooltip=tooltip)
        self.result = w.HTML()
        self.listeners: list[Callable[[str], None]] = []  # told the new run's id, in order

    def fork(self, run_id: str, at_event: int) -> dict[str, Any]:
        """`engine.fork` as the chosen identity; say what happened; tell the listeners the fork's id."""
        envelope: dict[str, Any] = self.engine.fork(run_id, at_event=at_event, caller=self.caller.value)
        if not envelope["ok"]:
            error = envelope["error"]
            self.result.value = issues_html(list(error.get("issues") or []) or
                                            [f"{error['code']}: {error['message']}"])
            return envelope
        data = envelope["data"]
        released = f" · released: {', '.join(data['released'])} (ready again)" if data["released"] else ""
        self.result.value = (f'<div class="ps-ok">Forked {esc(run_id)} after event {data["atEvent"]} → '
                             f'<b>{esc(data["runId"])}</b> (test mode){esc(released)}</div>')
        for listener in list(self.listeners):
            listener(data["runId"])
        return envelope


__all__ = ["ForkControl"]
