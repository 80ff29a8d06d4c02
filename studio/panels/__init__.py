"""Studio panels (ipywidgets): author, simulate, graph, history, and `Studio` composing them in a Tab.

    from studio.panels import Studio
    Studio(engine)            # in a notebook cell

State changes go through `Engine.call` only (and `engine.publish` for new versions); panels read with
`engine.run_state`, `engine.sql` and `engine.process`.
"""

from .author import AuthorPanel
from .graph import GraphPanel
from .history import HistoryPanel
from .simulate import SimulatePanel
from .studio import Studio, export_html

__all__ = ["AuthorPanel", "GraphPanel", "HistoryPanel", "SimulatePanel", "Studio", "export_html"]
