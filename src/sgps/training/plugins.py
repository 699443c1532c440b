"""The method plug-ins: what each learning method says it is and what it supplies to a trained run.

Every `run.algorithm` belongs to one plug-in (`plugin_for`). The Bootstrap methods
(the flat baselines and π^SG, `sgps.training.methods.flat` and `.subgoal`) learn in the
Bootstrap loop; HIPS-ε (`sgps.training.methods.hips`) learns offline from a dataset.
Whoever uses a trained run (`sgps test`, `sgps subgoals`, `sgps.load`, `sgps report`,
packing) goes through its plug-in and asks it, never the algorithm's name:

- `bootstrap`: trained by the Bootstrap loop (it resumes, and its searches may run in a
  pool of processes or Ray actors); an offline method trains with `train_offline`;
- `draws_subgoals`: has a subgoal generator `sgps subgoals` can draw;
- `settings`: the run's own settings, checked, from its config.toml (read once, by
  `sgps.runs.run.Run`);
- `searcher`: the run's trained search for levels of one size (`RunSearch`);
- `search_algorithm`: another search the run's model can guide, or a `ConfigError`.

Adding a method: an object satisfying `sgps.training.methods.plugin.MethodPlugin`, listed in
`PLUGINS` (a Bootstrap method also gets its builder in `sgps.training.setup.METHODS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sgps.errors import ConfigError
from sgps.search.costs import Algorithm
from sgps.training.config import TrainConfig, load_run_config
from sgps.training.methods.hips.run import HIPS_PLUGIN
from sgps.training.methods.plugin import MethodPlugin, OpenRun, RunSearch
from sgps.training.setup import (
    FLAT_HEADS,
    SUBGOAL_COSTS,
    build_method,
    default_evaluation_batch,
    pick_device,
    search_algorithm,
)


class BootstrapPlugin:
    """A method of the Bootstrap loop: its networks and learner come from `sgps.training.setup.METHODS`."""

    bootstrap = True
    train_offline = None  # `sgps.runs.runner.train` trains them

    def __init__(self, algorithms: tuple[str, ...], draws_subgoals: bool) -> None:
        self.algorithms = algorithms
        self.draws_subgoals = draws_subgoals

    def settings(
        self, document: Mapping[str, Any], file: Path, overrides: Mapping[str, Any] | None = None
    ) -> TrainConfig:
        return load_run_config(file, overrides, document=document)

    def epsilon(self, settings: TrainConfig) -> float:
        return settings.bootstrap.epsilon

    def searcher(
        self, run: OpenRun, example: Any, checkpoint: Path, *, device: str | None = None, epsilon: float | None = None
    ) -> RunSearch:
        """The run's method with the checkpoint's weights; the run's evaluation batch (0: the device's default)."""
        config: TrainConfig = run.settings
        if device is not None:
            config = dataclasses.replace(config, run=dataclasses.replace(config.run, device=device))
        method = build_method(run.domain, example, config)
        method.load_model(checkpoint)
        batch = config.search.evaluation_batch or default_evaluation_batch(pick_device(config.run.device).type)
        return RunSearch(run.domain, method.algorithm, method.test_evaluator(),
                         self.epsilon(config) if epsilon is None else epsilon, batch, method=method)  # fmt: skip

    def search_algorithm(self, run: OpenRun, name: str) -> Algorithm:
        """Any search whose heads the run's network has (a flat network may lack the policy or the heuristic)."""
        try:
            algorithm = search_algorithm(name, run.settings)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        policy, heuristic = FLAT_HEADS.get(run.algorithm, (True, True))
        for needed, present, head in ((algorithm.uses_policy, policy, "policy"),
                                      (algorithm.uses_heuristic, heuristic, "heuristic")):  # fmt: skip
            if needed and not present:
                raise ConfigError(f"{name} needs a {head}, and the network of this {run.algorithm} run has none")
        return algorithm


#: Every method, by the algorithms it trains.
PLUGINS: tuple[MethodPlugin, ...] = (
    BootstrapPlugin(tuple(FLAT_HEADS), draws_subgoals=False),
    BootstrapPlugin(tuple(SUBGOAL_COSTS), draws_subgoals=True),
    HIPS_PLUGIN,
)


def plugin_for(algorithm: str) -> MethodPlugin:
    """The plug-in of the method that trains `algorithm`; a `ConfigError` naming the known ones."""
    for plugin in PLUGINS:
        if algorithm in plugin.algorithms:
            return plugin
    known = ", ".join(name for plugin in PLUGINS for name in plugin.algorithms)
    raise ConfigError(f"run.algorithm must be one of {known}, not {algorithm!r}")
