"""Batch simulation: drive many runs through Engine.call on a virtual clock and find the bottleneck."""

from .behaviour import Behaviour, BehaviourError, Context, Dist
from .compare import Comparison, compare
from .fit import FittedBehaviour, fit
from .result import SimulationResult, enable_offline_charts
from .runner import Simulator, simulate

__all__ = ["Behaviour", "BehaviourError", "Comparison", "Context", "Dist", "FittedBehaviour", "SimulationResult",
           "Simulator", "compare", "fit", "enable_offline_charts", "simulate"]
