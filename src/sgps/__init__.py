"""sgps: policy tree search (LevinTS, PHS*) guided by subgoal-conditioned policies.

An implementation of "Subgoal-Guided Policy Heuristic Search with Learned Subgoals"
(Tuero, Buro and Lelis, ICML 2025), its baselines, and its five benchmark domains.

The Python API (`sgps.train`, `sgps.fork`, `sgps.load`, `Searcher`, see `sgps.api`) is imported on
first use, so that ``import sgps.domains`` does not pay for importing PyTorch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sgps.api import Fork, Searcher, SearchOutcome, TrainedRun, fork, load, train

__version__ = "0.1.0"

_API = ("Fork", "SearchOutcome", "Searcher", "TrainedRun", "fork", "load", "train")

__all__ = ["Fork", "SearchOutcome", "Searcher", "TrainedRun", "__version__", "fork", "load", "train"]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module("sgps.api"), name)
    raise AttributeError(f"module 'sgps' has no attribute {name!r}")
