"""A run folder opened once: its configuration read and checked, its method's plug-in, its files.

``Run.open(path)`` reads ``RUN/config.toml`` once, finds the plug-in of its
``run.algorithm`` (`sgps.training.plugins`) and has the plug-in check the settings.
Training (a resumed run), testing, ``sgps subgoals``, the Python API (`sgps.load`),
``sgps report`` and packing are handed this one object and ask it what they need: the
domain, the settings, a checkpoint's path, the run's trained search (`Run.searcher`), its
metrics and records (`Run.directory`), its lock. None of them reads config.toml again.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.domains.base import Domain
from sgps.domains.registry import get_domain
from sgps.errors import CheckpointError, ConfigError
from sgps.runs.rundir import RunDirectory
from sgps.runs.testing import record_path
from sgps.runs.trainer_state import read_trainer_state
from sgps.search.costs import Algorithm
from sgps.training.config import TrainConfig, read_toml
from sgps.training.methods.plugin import MethodPlugin, RunSearch
from sgps.training.plugins import PLUGINS, plugin_for

CONFIG = "config.toml"
#: What `checkpoint` names besides a file: `best` means `last` until a validation has solved a problem.
NAMED_CHECKPOINTS = {"best": "checkpoints/best.safetensors", "last": "checkpoints/latest.safetensors"}


@dataclass(frozen=True, eq=False)
class Run:
    """One run folder, its config.toml read once (`open`)."""

    path: Path
    document: Mapping[str, Any]  # config.toml as read
    plugin: MethodPlugin  # the method's plug-in (`sgps.training.plugins`)
    settings: Any  # checked by the plug-in: a `TrainConfig` for a Bootstrap method, its own settings otherwise

    @classmethod
    def open(cls, path: str | Path, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> Run:
        """Read and check the run folder `path`'s config.toml; `overrides` (a resumed run's) applied over it."""
        path = Path(path)
        return cls.from_document(path, read_toml(path / CONFIG), overrides)

    @classmethod
    def of(cls, run: str | Path | Run) -> Run:
        """`run` itself when it is open already, else `open(run)`: a command opens its run once and hands it on."""
        return run if isinstance(run, Run) else cls.open(run)

    @classmethod
    def from_document(
        cls, path: Path, document: Mapping[str, Any], overrides: Mapping[str, Mapping[str, Any]] | None = None
    ) -> Run:
        """The run folder `path` whose config.toml holds `document` (read by the caller, e.g. from an archive)."""
        file = path / CONFIG
        section = document.get("run")
        algorithm = section.get("algorithm") if isinstance(section, Mapping) else None
        if not isinstance(algorithm, str):  # the Bootstrap methods' check names every key missing
            PLUGINS[0].settings(document, file, overrides)
            raise ConfigError(f"{file}: the run's configuration is incomplete (missing run.algorithm); restore the "
                              "file, or add the key with its value")  # fmt: skip
        try:
            plugin = plugin_for(algorithm)
        except ConfigError as error:
            raise ConfigError(f"{file}: {error}") from None
        return cls(path, document, plugin, plugin.settings(document, file, overrides))

    @property
    def algorithm(self) -> str:
        return str(self.document["run"]["algorithm"])

    @property
    def device(self) -> str:
        """Where the run's models live (`run.device`: cpu, cuda or auto)."""
        return str(self.document["run"].get("device", "cpu"))

    @functools.cached_property
    def domain(self) -> Domain[Any]:
        return get_domain(str(self.document["run"].get("domain")))

    @property
    def config(self) -> TrainConfig:
        """The configuration of a run of the Bootstrap loop; a `ConfigError` for a method that learns otherwise."""
        if not self.plugin.bootstrap:
            raise ConfigError(f"{self.path}: a {self.algorithm} run, which learns offline, has no Bootstrap "
                              "configuration")  # fmt: skip
        return self.settings

    @property
    def epsilon(self) -> float:
        """The policy noise of the run's searches."""
        return self.plugin.epsilon(self.settings)

    @functools.cached_property
    def directory(self) -> RunDirectory:
        """The run's metrics, log and lock (`sgps.runs.rundir`)."""
        return RunDirectory(self.path)

    def checkpoint(self, name: str = "best") -> Path:
        """`best` (`best_weights`), `last`, or a path (`sgps test --checkpoint`)."""
        return checkpoint_path(self.path, name)

    def weights(self, name: str = "best") -> Path:
        """`checkpoint(name)`, which must exist (a `CheckpointError` otherwise)."""
        path = self.checkpoint(name)
        if not path.is_file():
            raise CheckpointError(f"{path}: no such checkpoint file")
        return path

    def searcher(
        self, example: Any, checkpoint: Path, *, device: str | None = None, epsilon: float | None = None
    ) -> RunSearch:
        """The run's trained search with the weights of `checkpoint`, for levels shaped like the state `example`."""
        return self.plugin.searcher(self, example, checkpoint, device=device, epsilon=epsilon)

    def search_algorithm(self, name: str) -> Algorithm:
        """The search `name` guided by the run's model (a `ConfigError` if its model cannot guide it)."""
        return self.plugin.search_algorithm(self, name)

    def record_path(self, problems: Path) -> Path:
        """Where `sgps test` records its attempts at the level file `problems`."""
        return record_path(self.path, problems)

    def loop_state(self) -> dict[str, Any] | None:
        """The loop state of the trainer checkpoint (spec/algorithms.md 6.5); None before the first one."""
        return loop_state(self.path)

    def training_finished(self) -> bool:
        """Whether training has ended (`training_finished`)."""
        return training_finished(self.path, offline=not self.plugin.bootstrap)


def loop_state(run: Path) -> dict[str, Any] | None:
    """The loop state of the trainer checkpoint of the run folder `run`; None before the first one."""
    path = run / "checkpoints" / "trainer.pt"
    if not path.exists():
        return None
    payload = read_trainer_state(path)
    if not isinstance(payload, dict) or not isinstance(payload.get("loop"), dict):
        raise CheckpointError(f"{path}: not a readable trainer checkpoint (no loop state)")
    return dict(payload["loop"])


def training_finished(run: Path, *, offline: bool) -> bool:
    """Whether the training of the run in folder `run` has ended: its loop state says so, or, for a
    method that learns `offline` (no loop), its checkpoint exists (written last, atomically)."""
    state = loop_state(run)
    if state is not None:
        return bool(state["finished"])
    return offline and (run / NAMED_CHECKPOINTS["last"]).exists()


def checkpoint_path(run: Path, checkpoint: str) -> Path:
    """`best` (`best_weights`), `last`, or a path."""
    if checkpoint == "best":
        return best_weights(run)[0]
    named = {name: run / member for name, member in NAMED_CHECKPOINTS.items()}
    return named.get(checkpoint, Path(checkpoint))


def best_weights(run: Path) -> tuple[Path, str]:
    """The weights `best` names in the run folder `run`, and why, in words.

    The weights the validation chose (spec/algorithms.md 6.5: most validation problems
    solved, then the shortest solutions) when a validation has solved a problem. Where none
    has (no validation yet, or each solved nothing), the validation chose nothing: a
    validation that solved nothing picks the first weights it saw, which on a hard set are
    the worst of the run, so `best` means the latest weights then.
    """
    best, last = run / NAMED_CHECKPOINTS["best"], run / NAMED_CHECKPOINTS["last"]
    if not best.exists():
        return last, "its latest weights (no validation has chosen weights yet)"
    state = loop_state(run)
    if state is None:  # a run without a Bootstrap loop (HIPS-ε) whose validation wrote best
        return best, "its best weights"
    chosen = int(state.get("best_validation", -1))
    if chosen <= 0:
        return last, "its latest weights (no validation has solved a problem yet, so none chose weights)"
    return best, f"its best weights (the validation pass that solved most: {chosen} problems)"


def describe_weights(run: Path, checkpoint: str) -> str:
    """Which weights `checkpoint` (best, last or a path) names in `run`, in words, for a command to say."""
    if checkpoint == "best":
        path, words = best_weights(run)
    elif checkpoint == "last":
        path, words = run / NAMED_CHECKPOINTS["last"], "its latest weights"
    else:
        return f"the weights in {checkpoint}"
    state = loop_state(run) if path.name == "latest.safetensors" else None
    if state is not None:
        words += f", after {int(state.get('cumulative_expansions', 0)):,} training expansions"
    return words
