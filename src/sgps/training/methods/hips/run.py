"""`sgps train --algorithm hips-eps`, and HIPS-ε's method plug-in (`HIPS_PLUGIN`).

HIPS-ε is trained offline, from a dataset (`sgps dataset`), not by the Bootstrap loop;
its run directory has the usual layout (`sgps.runs.rundir`): ``config.toml`` with a
``[run]`` section (algorithm ``hips-eps``, domain, device, seed, the dataset's path)
and a ``[hips]`` section (`HipsSettings`), ``metrics/learning.csv`` with one row per
phase and epoch, ``checkpoints/latest.safetensors`` and ``log.txt``. Its plug-in supplies
HIPS-ε's hybrid search to `sgps test` and `sgps.load`, as the other methods' plug-ins do.

Learning offline, `train` (the plug-in's `train_offline`, which `sgps train` calls) makes
its run folder itself, with `sgps.runs.rundir` after `sgps.runs.memory`'s check: the one
place the methods import from the run folder's package above them, allow-listed in
tests/test_architecture.py (docs/training.md, "Layout").
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch

from sgps.domains.base import Domain
from sgps.domains.levels import Level, read_levels
from sgps.errors import CheckpointError, ConfigError
from sgps.models.checkpoint import (
    SEARCH_KEY,
    load_checkpoint,
    recorded_architecture,
    save_checkpoint,
)
from sgps.models.hips import HipsConfig, HipsModel, cell_patterns
from sgps.outputs import FOLDER, RUN, Output, check_outputs
from sgps.runs.memory import check_hips_memory
from sgps.runs.rundir import RUN_FILES, RunDirectory
from sgps.search.costs import Algorithm, make_algorithm
from sgps.training.config import read_toml
from sgps.training.methods.hips.dataset import Trajectory, build_dataset, dataset_journal, read_dataset, write_dataset
from sgps.training.methods.hips.learner import HipsLearner, HipsSettings
from sgps.training.methods.hips.search import HipsHeuristic, HybridChildren
from sgps.training.methods.plugin import OpenRun, RunSearch
from sgps.training.schema import InvalidSettingError, check_value, validate_section
from sgps.training.setup import pick_device
from sgps.version import sgps_version

ALGORITHM = "hips-eps"
#: Network sizes and training lengths: `tiny` for tests, `cpu` for a CPU, `paper` the defaults (spec 8.2).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {"channels": 8, "blocks": 1, "codebook_size": 8, "code_dim": 16, "vq_channels": 8, "vq_blocks": 1,
             "minibatch": 32, "warm_start_epochs": 2, "segmentation_rounds": 2, "epochs": 4},
    "cpu": {"channels": 32, "blocks": 2, "code_dim": 32, "vq_channels": 32, "vq_blocks": 2},
    "paper": {},
}  # fmt: skip
LEARNING_COLUMNS = ("phase", "loss", "detector_loss", "segment", "seconds")
#: What `_not_at_goal` filters: the levels to solve, or a dataset's trajectories.
Item = TypeVar("Item", Level, Trajectory)


def resolve_settings(
    preset: str, file: Path | None = None, overrides: Mapping[str, Any] | None = None, origin: str = "command line"
) -> HipsSettings:
    """A preset, then the `[hips]` table of `file`, then `overrides` (from `origin`), each key checked."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    values: dict[str, Any] = dict(PRESETS[preset])
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if file is not None:
        document = read_toml(file)
        unknown = sorted(set(document) - {"hips"})
        if unknown:
            raise ConfigError(f"{file}: a hips-eps run reads only a [hips] section, not [{unknown[0]}]")
        layers.append((str(file), document.get("hips", {})))
    layers.append((origin, overrides or {}))
    fields = [field.name for field in dataclasses.fields(HipsSettings)]
    for source, layer in layers:
        if not isinstance(layer, Mapping):
            raise ConfigError(f"{source}: hips must be a table of keys (a [hips] section), not {layer!r}")
        for key, value in layer.items():
            if key not in fields:
                raise ConfigError(f"{source}: unknown key hips.{key} (keys: {', '.join(fields)})")
            try:
                values[key] = check_value("hips", key, value)
            except ConfigError as error:
                raise ConfigError(f"{source}: {error}") from None
    return HipsSettings(**validate_section("hips", {**dataclasses.asdict(HipsSettings()), **values}))


def model_config(
    settings: HipsSettings,
    observation_shape: tuple[int, int, int],
    num_actions: int,
    patterns: tuple[tuple[int, ...], ...] = (),
) -> HipsConfig:
    """The networks' architecture: the settings' sizes, for the domain's observations and cell `patterns`."""
    return HipsConfig(observation_shape, num_actions, settings.channels, settings.blocks, settings.codebook_size,
                      settings.code_dim, settings.vq_channels, settings.vq_blocks, settings.horizon,
                      patterns)  # fmt: skip


def train(
    dataset_path: Path | None,
    out: Path,
    *,
    problems: Path | None = None,
    domain: str | None = None,
    preset: str = "cpu",
    config_file: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    seed: int = 0,
    device: str = "cpu",
    overwrite: bool = False,
    threads: int | None = None,
    extra_problems: Path | None = None,
) -> tuple[HipsSettings, int]:
    """Train HIPS-ε into run directory `out`; (settings, trajectories).

    The trajectories come from `dataset_path` (`sgps dataset`), or, with `problems`
    instead, from solving those levels first (written to RUN/dataset.npz, journalled in
    RUN/dataset.npz.journal so that an interrupted solve goes on where it stopped), as
    `sgps compare` does; `extra_problems`: more levels to learn from (HIPS-ε learns
    offline, so it may see more levels than the Bootstrap methods' training set).
    `threads`: torch threads (default: torch's own choice).
    """
    if (dataset_path is None) == (problems is None):
        raise ConfigError(f"{ALGORITHM} trains from a dataset or from training levels: give one of the two")
    if extra_problems is not None and problems is None:
        raise ConfigError("--extra-problems adds levels to --problems; a --dataset is used as it is")
    check_outputs([Output("--out", out, FOLDER, replaces=RUN_FILES, owner=RUN)],
                  [("--dataset", dataset_path), ("--problems", problems), ("--extra-problems", extra_problems),
                   ("--config", config_file)])  # fmt: skip
    try:
        check_value("bootstrap", "seed", seed)  # the Bootstrap methods' rule for the same --seed
    except InvalidSettingError as error:
        raise ConfigError(f"--seed {error.problem}") from None
    settings = resolve_settings(preset, config_file, overrides)
    if threads is not None:
        torch.set_num_threads(threads)
    run_dir = RunDirectory(out, LEARNING_COLUMNS)
    if run_dir.holds_a_run() and not overwrite:
        raise ConfigError(f"{out} already holds a run; pass --overwrite to replace it, or choose another --out")
    if problems is not None:
        levels = read_levels(problems, domain)
        shape = levels.observation_shape()
        _check_memory(settings, levels.domain, levels.levels[0].state, device)  # before the folder is made
        all_levels = list(levels.levels)
        if extra_problems is not None:
            extra = read_levels(extra_problems, levels.domain.name)
            extra.observation_shape(shape)
            all_levels += _new_levels(levels.domain, all_levels, extra.levels)
        all_levels = _not_at_goal(levels.domain, all_levels, lambda level: level.state, problems)
        created = not out.exists()
        out.mkdir(parents=True, exist_ok=True)
        dataset_path = out / "dataset.npz"
        journal = dataset_journal(dataset_path)
        built = build_dataset(levels.domain, all_levels, journal=journal)
        if not built.dataset.trajectories:  # a refusal leaves the disk as it was
            journal.unlink(missing_ok=True)
            if created:
                out.rmdir()
            raise ConfigError(f"{problems}: the exact solver finished none of the {len(all_levels)} levels")
        write_dataset(dataset_path, built.dataset)
        journal.unlink()
        for name, reason in built.skipped:
            print(f"skipped {name}: {reason}")
    assert dataset_path is not None
    dataset = read_dataset(dataset_path, domain)
    trajectories = _not_at_goal(dataset.domain, dataset.trajectories, lambda trajectory: trajectory.states[0],
                                dataset_path)  # fmt: skip
    dataset = dataclasses.replace(dataset, trajectories=tuple(trajectories))
    example = dataset.trajectories[0].states[0]
    if problems is None:  # levels to solve were checked before solving them
        _check_memory(settings, dataset.domain, example, device)
    torch_device = pick_device(device)
    torch.manual_seed(seed)
    observed = (dataset.domain.observe(list(trajectory.states)) for trajectory in dataset.trajectories)
    model = HipsModel(model_config(settings, dataset.domain.observation_shape(example), dataset.domain.num_actions,
                                   cell_patterns(observed))).to(torch_device)  # fmt: skip
    config = {
        "run": {"algorithm": ALGORITHM, "domain": dataset.domain.name, "device": device, "seed": seed,
                "dataset": str(dataset_path.resolve())},
        "hips": dataclasses.asdict(settings),
    }  # fmt: skip
    started = time.perf_counter()
    with run_dir.lock():
        if overwrite:
            run_dir.clear()
        run_dir.create(config)
        run_dir.log(f"sgps {sgps_version()}")
        run_dir.log(f"{len(dataset.trajectories)} trajectories, {dataset.transitions} transitions from {dataset_path}")

        def report(phase: str, epoch: int, loss: float, extra: dict[str, float]) -> None:
            seconds = time.perf_counter() - started
            row = {"iteration": epoch, "batch": 0, "phase": phase, "loss": loss, "seconds": round(seconds, 2),
                   "detector_loss": extra.get("detector_loss", ""), "segment": extra.get("segment", "")}  # fmt: skip
            run_dir.append("learning", [row])
            run_dir.log(f"{phase} {epoch}: loss {loss:.4f}" + "".join(f", {k} {v:.3f}" for k, v in extra.items()))

        HipsLearner(model, settings, seed, torch_device).train(dataset, report)
        save_checkpoint(run_dir.checkpoints / "latest.safetensors", model, {SEARCH_KEY: ALGORITHM})
        run_dir.log(f"trained in {time.perf_counter() - started:.0f} s")
    return settings, len(dataset.trajectories)


def _check_memory(settings: HipsSettings, domain: Domain[Any], example: Any, device: str) -> None:
    """Refuse networks that cannot fit in memory before anything is written or solved
    (`sgps.runs.memory.check_hips_memory`: built on the meta device, nothing allocated)."""
    shape = domain.observation_shape(example)
    check_hips_memory(lambda: HipsModel(model_config(settings, shape, domain.num_actions)), settings, shape,
                      pick_device(device).type)  # fmt: skip


def _new_levels(domain: Domain[Any], known: Sequence[Level], extra: Sequence[Level]) -> list[Level]:
    """The levels of `extra` (--extra-problems) that are neither in `known` nor earlier in `extra`, by
    their content: a level given twice would be learnt twice. How many were dropped is said."""
    seen = {tuple(domain.encode(level.state)) for level in known}
    kept = []
    for level in extra:
        content = tuple(domain.encode(level.state))
        if content not in seen:
            seen.add(content)
            kept.append(level)
    if len(kept) < len(extra):
        print(f"dropped {len(extra) - len(kept)} of the {len(extra)} --extra-problems levels: already in --problems "
              "(or given twice); each level is learnt once")  # fmt: skip
    return kept


def _not_at_goal(domain: Domain[Any], items: Sequence[Item], start: Callable[[Item], Any], source: Path) -> list[Item]:
    """The levels or trajectories of `items` whose `start` state is not a goal, each one left out named.

    A level that starts at its goal has an empty solution, which teaches HIPS-ε nothing (its
    networks learn from a solution's transitions); it is skipped like a level the solver
    cannot finish, and a `ConfigError` naming `source` when no other level is left.
    """
    kept = []
    for item in items:
        if domain.is_goal(start(item)):
            print(f"skipped {item.name}: it starts at its goal (nothing to learn)")
        else:
            kept.append(item)
    if not kept:
        raise ConfigError(f"{source}: all {len(items)} levels start at their goal; {ALGORITHM} has nothing to learn "
                          "from a solution without a step")  # fmt: skip
    return kept


class HipsPlugin:
    """HIPS-ε as a method plug-in (`sgps.training.methods.plugin.MethodPlugin`): it learns offline
    (`train_offline`), so it neither resumes nor searches in pools, and it has no subgoal pictures;
    its trained search is the hybrid complete search (`HybridChildren` with `HipsHeuristic`)."""

    algorithms = (ALGORITHM,)
    bootstrap = False
    draws_subgoals = False
    train_offline = staticmethod(train)

    def settings(
        self, document: Mapping[str, Any], file: Path, overrides: Mapping[str, Any] | None = None
    ) -> HipsSettings:
        """The `[hips]` section of the run's config.toml over the defaults, every key checked."""
        if overrides:
            raise ConfigError(f"{file}: a {ALGORITHM} run is not resumed; its settings stay as they are")
        return resolve_settings("paper", None, document.get("hips", {}), origin=str(file))

    def epsilon(self, settings: HipsSettings) -> float:
        return settings.epsilon

    def searcher(
        self, run: OpenRun, example: Any, checkpoint: Path, *, device: str | None = None, epsilon: float | None = None
    ) -> RunSearch:
        """The hybrid search with the checkpoint's networks (eval mode), for levels shaped like `example`."""
        settings: HipsSettings = run.settings
        domain = run.domain
        torch_device = pick_device(device or run.device)
        patterns = recorded_architecture(checkpoint).get("cell_patterns", ())  # none before the patterns existed
        try:
            config = model_config(settings, domain.observation_shape(example), domain.num_actions,
                                  tuple(tuple(pattern) for pattern in patterns))  # fmt: skip
        except (TypeError, ValueError) as error:
            raise CheckpointError(f"{checkpoint}: its cell patterns do not fit {domain.name} ({error})") from None
        model = HipsModel(config).to(torch_device)
        load_checkpoint(checkpoint, model, {SEARCH_KEY: ALGORITHM})
        model.eval()
        noise = settings.epsilon if epsilon is None else epsilon
        children = HybridChildren(domain, model, epsilon=noise, rollout_steps=settings.rollout_cap(domain.name),
                                  device=torch_device)  # fmt: skip
        return RunSearch(domain, make_algorithm("hips"), HipsHeuristic(domain, model, torch_device), noise,
                         children=children)  # fmt: skip

    def search_algorithm(self, run: OpenRun, name: str) -> Algorithm:
        """Only its own hybrid search: its networks give no policy over primitive actions."""
        if name != "hips":
            raise ConfigError(f"a {ALGORITHM} run searches with its hybrid search (hips) only, not {name}")
        return make_algorithm("hips")


HIPS_PLUGIN = HipsPlugin()
