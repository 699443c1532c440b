"""The interface of a method plug-in (`MethodPlugin`), the trained search it supplies (`RunSearch`),
and what it reads of an opened run (`OpenRun`).

The plug-ins themselves and their registry are `sgps.training.plugins`; this module is
what a method package implements against, so that it needs nothing from the registry.
A plug-in is handed the run folder opened once (`sgps.runs.run.Run`) but knows it only as
an `OpenRun`: the run folder's package sits above the methods, and this interface imports
nothing from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sgps.domains.base import Domain
from sgps.search.children import ChildGenerator
from sgps.search.costs import Algorithm
from sgps.search.evaluators import Evaluator
from sgps.training.bootstrap import Method


class OpenRun(Protocol):
    """What a plug-in reads of an opened run folder (`sgps.runs.run.Run` is one)."""

    @property
    def algorithm(self) -> str:
        """The run's `run.algorithm`."""
        ...

    @property
    def device(self) -> str:
        """Where the run's models live (`run.device`: cpu, cuda or auto)."""
        ...

    @property
    def domain(self) -> Domain[Any]:
        """The run's domain."""
        ...

    @property
    def settings(self) -> Any:
        """The settings the plug-in checked (`MethodPlugin.settings`)."""
        ...


@dataclass(frozen=True)
class RunSearch:
    """A trained run's search for levels of one size: what the test procedure, the pools and `sgps.load` drive."""

    domain: Domain[Any]
    algorithm: Algorithm
    evaluator: Evaluator
    epsilon: float  # the policy noise of its searches (`search.engine`)
    evaluation_batch: int = 1  # children a search gathers per evaluation (1: exact best-first order)
    children: ChildGenerator[Any] | None = None  # expand through these (HIPS-ε's hybrid children) instead of actions
    method: Method | None = None  # the Bootstrap method behind it, whose model pools copy; None for offline methods


class MethodPlugin(Protocol):
    """What a learning method declares and supplies (the module docstring says who asks for what)."""

    algorithms: tuple[str, ...]  # the run.algorithm values it trains
    bootstrap: bool
    draws_subgoals: bool
    #: How a method that learns offline trains (`sgps train` hands it the command's options); None for
    #: the Bootstrap methods, which `sgps.runs.runner.train` trains. Returns (settings, examples learnt).
    train_offline: Callable[..., tuple[Any, int]] | None

    def settings(self, document: Mapping[str, Any], file: Path, overrides: Mapping[str, Any] | None) -> Any:
        """The run's settings from its config.toml `document` (read from `file`), checked; `overrides` applied."""
        ...

    def epsilon(self, settings: Any) -> float:
        """The policy noise its searches use by default."""
        ...

    def searcher(
        self, run: OpenRun, example: Any, checkpoint: Path, *, device: str | None = None, epsilon: float | None = None
    ) -> RunSearch:
        """The run's search with the weights of `checkpoint`, for levels shaped like the state `example`."""
        ...

    def search_algorithm(self, run: OpenRun, name: str) -> Algorithm:
        """The search called `name` guided by the run's model; a `ConfigError` if its model cannot guide it."""
        ...
