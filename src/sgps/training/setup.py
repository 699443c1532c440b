"""Building a run's pieces from its configuration: device, the method (`METHODS`), problem split,
and the settings whose `auto` or 0 is picked by device (where a pool's searches are evaluated,
the evaluation batch); and keeping a process's long-lived set-up out of the garbage collector's way."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from sgps.domains.base import Domain
from sgps.domains.levels import LevelSet, read_levels
from sgps.errors import ConfigError
from sgps.models.cost import flops_per_state
from sgps.models.flat import FlatNetwork, FlatNetworkConfig
from sgps.models.subgoal import SubgoalModel
from sgps.search.costs import Algorithm, make_algorithm
from sgps.training.bootstrap import Method
from sgps.training.config import TrainConfig, resolve_config
from sgps.training.methods.flat.learner import FlatLearner, FlatMethod
from sgps.training.methods.subgoal.learner import SubgoalLearner, SubgoalMethod

#: The flat algorithms and the heads their network needs.
FLAT_HEADS = {"phs": (True, True), "levin": (True, False), "wastar": (False, True)}
#: The subgoal-guided algorithms and the search cost each uses.
SUBGOAL_COSTS = {"phs-sg": "phs", "levin-sg": "levin"}


def pick_device(name: str) -> torch.device:
    """`cpu`, `cuda`, or `auto` (cuda when available)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("run.device is 'cuda' but no CUDA device is available")
    if name not in ("cpu", "cuda"):
        raise ConfigError(f"run.device must be cpu, cuda or auto, not {name!r}")
    return torch.device(name)


def evaluator_place(setting: str, device_type: str) -> str:
    """ "shared" or "per-process" for `run.evaluator` with the model on `device_type` ("auto":
    shared when the model is on a GPU, model copies on a CPU; docs/training.md measures both)."""
    if setting == "auto":
        return "shared" if device_type == "cuda" else "per-process"
    return setting


def default_evaluation_batch(device_type: str) -> int:
    """Children a search gathers per evaluation when `search.evaluation_batch = 0`: 1 (exact
    order) on a CPU, 32 (the reference trainer's buffered order) on a GPU, where it made
    learning faster in wall time although it costs expansions (docs/training.md, "The
    evaluation batch")."""
    return 32 if device_type == "cuda" else 1


def build_method(domain: Domain[Any], example: Any, config: TrainConfig) -> Method:
    """The method `config.run.algorithm` names (`METHODS`), its networks seeded with the run seed."""
    builder = METHODS.get(config.run.algorithm)
    if builder is None:
        raise ConfigError(f"run.algorithm must be one of {', '.join(METHODS)}, not {config.run.algorithm!r}")
    return builder(domain, example, config)


def build_subgoal_method(domain: Domain[Any], example: Any, config: TrainConfig) -> SubgoalMethod:
    """PHS*(π^SG) or LevinTS(π^SG): the four π^SG networks, their learner and the method."""
    torch.manual_seed(config.bootstrap.seed)
    device = pick_device(config.run.device)
    model = subgoal_model(domain, example, config).to(device)
    generator = torch.Generator().manual_seed(config.bootstrap.seed)
    learner = SubgoalLearner(model, config.subgoal, config.learner, generator)
    algorithm = search_algorithm(SUBGOAL_COSTS[config.run.algorithm], config)
    return SubgoalMethod(domain, algorithm, learner, config.bootstrap.seed, device, config.search.precision)


def build_flat_method(domain: Domain[Any], example: Any, config: TrainConfig) -> FlatMethod:
    """The network, learner and method of a flat-baseline run, seeded with the run seed."""
    torch.manual_seed(config.bootstrap.seed)
    network = flat_network(domain, example, config).to(pick_device(config.run.device))
    generator = torch.Generator().manual_seed(config.bootstrap.seed)
    learner = FlatLearner(network, config.learner, generator)
    return FlatMethod(domain, search_algorithm(config.run.algorithm, config), learner, config.search.precision)


def flat_network(domain: Domain[Any], example: Any, config: TrainConfig) -> FlatNetwork:
    """The network of a flat-baseline run, unseeded, on torch's default device: what `build_flat_method`
    trains, and what `sgps.runs.memory` builds on the meta device to size a run before it starts."""
    if config.run.algorithm not in FLAT_HEADS:
        raise ConfigError(f"run.algorithm must be one of {', '.join(FLAT_HEADS)}, not {config.run.algorithm!r}")
    policy, heuristic = FLAT_HEADS[config.run.algorithm]
    network_config = FlatNetworkConfig(
        observation_shape=domain.observation_shape(example),
        num_actions=domain.num_actions,
        channels=config.network.channels,
        blocks=config.network.blocks,
        batch_norm=config.network.batch_norm,
        policy=policy,
        heuristic=heuristic,
    )
    return FlatNetwork(network_config)


def subgoal_model(domain: Domain[Any], example: Any, config: TrainConfig) -> SubgoalModel:
    """The four π^SG networks of a phs-sg / levin-sg run, unseeded, on torch's default device (as
    `flat_network`, for `build_subgoal_method` and `sgps.runs.memory`)."""
    return SubgoalModel(config.subgoal.model_config(domain.observation_shape(example), domain.num_actions))


#: `run.algorithm` -> the builder of its method (a new method registers here; see `sgps.training.methods`).
METHODS: dict[str, Callable[[Domain[Any], Any, TrainConfig], Method]] = {
    **dict.fromkeys(FLAT_HEADS, build_flat_method),
    **dict.fromkeys(SUBGOAL_COSTS, build_subgoal_method),
}
#: `run.algorithm` -> the networks its method learns (a new method registers here too): one module
#: holding every parameter the method's optimisers update, so that a run can be sized before it starts.
NETWORKS: dict[str, Callable[[Domain[Any], Any, TrainConfig], nn.Module]] = {
    **dict.fromkeys(FLAT_HEADS, flat_network),
    **dict.fromkeys(SUBGOAL_COSTS, subgoal_model),
}


def search_algorithm(name: str, config: TrainConfig) -> Algorithm:
    """The search `name` (levin, phs, wastar) with the run's `[search]` variants."""
    return make_algorithm(name, plus_one=config.search.levin_plus_one, duplicates=config.search.duplicates)


def freeze_setup() -> None:
    """Leave every object that exists now out of the garbage collector's full collections.

    A training or search process builds its problems, modules and networks once and keeps
    them for its whole life; without this every full collection walks them all again
    (about 0.2 s each, one or two per pool batch of hard BoulderDash at the `cpu` preset;
    docs/training.md, "Where the time goes with two processes"). The garbage of the set-up is collected first, so none
    is kept. Collections only free memory: results are the same either way.
    """
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def setup_frozen() -> Iterator[None]:
    """`freeze_setup` for the block, then every object back to the collector: for a run inside
    a process that lives on (`sgps.train` from Python), whose objects must be collectable after.
    A process that froze objects itself manages its collector: it is left as it is."""
    if gc.get_freeze_count():
        yield
        return
    freeze_setup()
    try:
        yield
    finally:
        gc.unfreeze()


def training_and_validation(
    problems: Path, levels: LevelSet, validation: Path | None, config: TrainConfig
) -> tuple[list[Any], list[Any]]:
    """A run's training and validation problems: the levels of `problems` (read as `levels`) and those
    of the `validation` file, or the levels split by `split_problems` when no validation file is given."""
    states = levels.states()
    if validation is not None:
        validation_set = read_levels(validation, levels.domain.name)
        validation_set.observation_shape(levels.observation_shape())
        train, held_out = states, validation_set.states()
    else:
        levels.observation_shape()
        train, held_out = split_problems(states, config.run.validation_fraction, config.bootstrap.seed)
    if not train:
        raise ConfigError(f"{problems}: no training problems left after the validation split")
    return train, held_out


def split_problems(levels: Sequence[Any], fraction: float, seed: int) -> tuple[list[Any], list[Any]]:
    """Shuffle with the run seed, then take the first (1 - fraction) for training, the rest for validation."""
    order = np.random.default_rng(seed).permutation(len(levels))
    cut = len(levels) - round(fraction * len(levels))
    return [levels[i] for i in order[:cut]], [levels[i] for i in order[cut:]]


__all__ = [
    "FLAT_HEADS",
    "METHODS",
    "NETWORKS",
    "SUBGOAL_COSTS",
    "build_flat_method",
    "build_method",
    "build_subgoal_method",
    "default_evaluation_batch",
    "evaluator_place",
    "flat_network",
    "freeze_setup",
    "pick_device",
    "search_algorithm",
    "setup_frozen",
    "split_problems",
    "subgoal_model",
    "training_and_validation",
]


def subgoal_flop_ratio(domain: Domain[Any], states: Sequence[Any], preset: str) -> float:
    """FLOPs per state of one PHS*(π^SG) evaluation over one PHS*(π) evaluation at `preset`.

    The presets keep it at most 1.2, as the paper's sizes do (about 1.1): docs/subgoals.md,
    "Compute-matched π^SG". Counted (`sgps.models.cost`), so the same on every machine.
    """
    flops = {}
    for algorithm in ("phs", "phs-sg"):
        config = resolve_config(preset, overrides={"run": {"device": "cpu", "algorithm": algorithm}})
        flops[algorithm] = flops_per_state(build_method(domain, states[0], config).evaluator(), states)
    return flops["phs-sg"] / flops["phs"]
