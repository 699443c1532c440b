"""The Python API for scripts: train a run, load it as a searcher, solve levels with it.

::

    import sgps

    run = sgps.train("train.txt", "runs/tsp", preset="tiny")
    searcher = sgps.load(run.path)
    result = searcher.solve("test.txt", index=0, budget=2000)

`train` takes the options of ``sgps train`` as keyword arguments, and `fork` those of
``sgps fork``. `load` opens a run
directory the way ``sgps test`` does (`sgps.runs.run.Run`): its ``config.toml`` names
the domain, algorithm and network, and its checkpoint holds the weights. A `Searcher`
builds the run's search (its method plug-in's) for the level size it is asked about (the
size the run was trained on; another size is a `CheckpointError`) and searches in exact
best-first order, as the test procedure does on a CPU.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.domains import Level, read_levels
from sgps.domains.animation import write_gif
from sgps.errors import CheckpointError, ConfigError, check_whole_number
from sgps.models.checkpoint import recorded_architecture
from sgps.runs import runner
from sgps.runs.fork import Fork, fork_changes, fork_run
from sgps.runs.memory import concurrent_searches
from sgps.runs.run import Run, describe_weights
from sgps.runs.rundir import RunDirectory
from sgps.runs.testing import record_name, record_path
from sgps.search import SearchResult, search, search_lockstep
from sgps.search.costs import Algorithm
from sgps.training.config import option_overrides
from sgps.training.methods.plugin import RunSearch
from sgps.training.session import check_session_minutes
from sgps.training.setup import pick_device
from sgps.zoo import ModelCard, locate

#: The devices `load` takes (`run.device`'s values).
DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class SearchOutcome:
    """What one search of one level found."""

    solved: bool
    status: str  # "solved", "budget" (the budget ran out) or "no_solution" (nothing left to expand)
    actions: tuple[int, ...] | None  # the solution's actions, when solved
    states: tuple[Any, ...] | None  # the states it visits, the start state first
    expansions: int
    generated: int
    seconds: float

    @property
    def length(self) -> int | None:
        """The number of actions of the solution, when solved."""
        return None if self.actions is None else len(self.actions)

    def __repr__(self) -> str:
        """A short summary: the states of a path would print thousands of characters."""
        return (f"SearchOutcome(status={self.status!r}, length={self.length}, expansions={self.expansions}, "
                f"seconds={self.seconds:.3f})")  # fmt: skip


@dataclass(frozen=True)
class TrainedRun:
    """Where a training run went and how it ended."""

    path: Path  # the run directory: `load(path)` searches with its model
    domain: str
    algorithm: str
    iterations: int  # passes over the training problems
    solved: int  # training problems solved at least once
    expansions: int  # over every training search
    best_validation: int  # most validation problems solved in one validation pass
    seconds: float


class Searcher:
    """A trained run's model driving its search: `solve` one level, `solve_many` in lockstep."""

    def __init__(
        self,
        run: Run,
        checkpoint: Path,
        device: str | None = None,
        *,
        card: ModelCard | None = None,
        weights_used: str = "",
    ) -> None:
        """Prefer `load`; `run` is the opened run folder, `checkpoint` its weights, `device` where they go
        (None: the run's own `run.device`); `card`: the pretrained model's card, whose levels alone it
        takes; `weights_used`: which weights these are, in words (`weights_used`)."""
        self.run = run
        self.checkpoint = checkpoint
        self.device = device
        self.card = card
        self.weights_used = weights_used or f"the weights in {checkpoint}"
        self.domain = run.domain
        self._searches: dict[tuple[tuple[int, int, int], float | None], RunSearch] = {}  # per shape and ε

    @property
    def algorithm(self) -> str:
        """The algorithm the run trained (its default search)."""
        return self.run.algorithm

    def solve(
        self,
        level: str | Path | Level | object,
        index: int | None = None,
        *,
        budget: int | None = 4000,
        algorithm: str | None = None,
        epsilon: float | None = None,
    ) -> SearchOutcome:
        """Search one level with the trained model.

        `level` is a level file or folder (`index` picks the level, the first by default),
        a `Level`, or a domain state (then `index` is refused: there is nothing to pick).
        `budget` caps the expansions (None: no cap). `algorithm` is the trained one by
        default, or any search the run's model can guide (a flat network: astar, wastar and
        gbfs need a heuristic head, levin a policy head, phs both, bfs neither; a hips-eps
        run: its hybrid search only). `epsilon` is the policy noise (default: the run's).
        """
        start = self._start(level, index)
        trained, chosen = self._prepare(start, algorithm, epsilon)
        result = search(
            self.domain, start, chosen, trained.evaluator,
            budget=self._budget(budget), epsilon=trained.epsilon, children=trained.children,
        )  # fmt: skip
        return _outcome(result)

    def solve_many(
        self,
        levels: str | Path | Sequence[Level | object],
        *,
        budget: int | None = 4000,
        algorithm: str | None = None,
        epsilon: float | None = None,
    ) -> list[SearchOutcome]:
        """Search every level (a level file or folder, or a list of `Level`s or states) in lockstep.

        Each search follows the order it would follow alone; the network evaluates the
        requests of all of them as one batch. With a budget, as many levels are searched at
        once as their trees fit in half this machine's memory (`sgps.runs.memory.concurrent_searches`:
        9 at 512,000 expansions with 24 GiB), the next level's search starting as one ends,
        which changes no outcome.
        The levels must share one size. The options are those of `solve`; the outcomes come
        back in input order.
        """
        if isinstance(levels, str | Path):
            level_set = read_levels(levels, self.domain)
            level_set.observation_shape()
            starts = level_set.states()
        else:
            if not isinstance(levels, Sequence):
                raise TypeError(f"levels must be a level file or folder, or a list of levels, not "
                                f"{type(levels).__name__}")  # fmt: skip
            if any(isinstance(level, str | Path) for level in levels):
                raise TypeError("levels is a list holding a path; pass the level file or folder itself")
            starts = [level.state if isinstance(level, Level) else level for level in levels]
            for number, start in enumerate(starts):
                self.domain.check_state(start, f"levels[{number}]")
        if not starts:
            return []
        shapes = {self.domain.observation_shape(start) for start in starts}
        if len(shapes) > 1:
            raise ConfigError(f"solve_many needs levels of one size; these have observation shapes {sorted(shapes)}")
        trained, chosen = self._prepare(starts[0], algorithm, epsilon)
        cap = self._budget(budget)
        at_once = len(starts) if cap is None else concurrent_searches(cap)  # the next starts as one ends
        results = search_lockstep(self.domain, starts, chosen, trained.evaluator, budget=cap, epsilon=trained.epsilon,
                                  children=trained.children, concurrency=at_once)  # fmt: skip
        return [_outcome(result) for result in results]

    def _start(self, level: str | Path | Level | object, index: int | None) -> Any:
        if isinstance(level, str | Path):
            index = 0 if index is None else index
            check_whole_number("index", index, 0)  # any integral number: a numpy integer too
            index = int(index)
            levels = read_levels(level, self.domain)
            if not 0 <= index < len(levels):
                raise ConfigError(f"{level} has {len(levels)} levels; index {index} is out of range")
            return levels.levels[index].state
        if index is not None:
            raise ConfigError(f"index picks a level of a level file or folder; this {type(level).__name__} is one "
                              "level, searched as it is (drop index)")  # fmt: skip
        state = level.state if isinstance(level, Level) else level
        self.domain.check_state(state)
        return state

    def _prepare(self, start: Any, name: str | None, epsilon: float | None) -> tuple[RunSearch, Algorithm]:
        """The run's search for levels shaped like `start` with policy noise `epsilon` (its weights loaded
        once per shape and noise), and the algorithm to search with (checked first)."""
        algorithm = None if name is None else self.run.search_algorithm(name)
        noise = None if epsilon is None else self._epsilon(epsilon)
        key = (self.domain.observation_shape(start), noise)
        if self.card is not None:
            self.card.check_level(self.domain.name, key[0], "level")
        trained = self._searches.get(key)
        if trained is None:
            trained = self.run.searcher(start, self.checkpoint, device=self.device, epsilon=noise)
            self._searches[key] = trained
        return trained, trained.algorithm if algorithm is None else algorithm

    def _budget(self, budget: int | None) -> int | None:
        """`budget` as an `int` (any integral number is one: a numpy integer too), or None for no budget."""
        if budget is None:
            return None
        check_whole_number("budget", budget, 1, label="the budget", note=" (or None for no budget)")
        return int(budget)

    def _epsilon(self, epsilon: float) -> float:
        if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):  # a numpy number too
            raise TypeError(f"epsilon must be a number from 0 to 1, not {type(epsilon).__name__} {epsilon!r}")
        if not 0.0 <= epsilon <= 1.0:  # NaN fails this too
            raise ConfigError(f"epsilon must be between 0 and 1, got {epsilon}")
        return float(epsilon)


def load(path: str | Path, *, checkpoint: str = "best", device: str | None = None) -> Searcher:
    """A trained run's model, or a pretrained model's, ready to search.

    `path` is a run directory, a checkpoint file in a run's ``checkpoints/`` folder, or the
    name of a pretrained model (`sgps.zoo`; ``sgps models`` lists them), e.g.
    ``sgps.load("hard-boulderdash")``: a name is looked up when no such path exists, and
    the model's files are checked against its card. For a run directory, `checkpoint` picks
    the weights as ``sgps test --checkpoint`` does: ``best`` (the weights the validation
    chose; the latest until a validation has solved a problem), ``last``, or a file; the
    searcher's `weights_used` says which. `device` is ``cpu``, ``cuda`` or ``auto`` (default:
    the run's own setting); ``cuda``, given or the run's, on a machine without a CUDA device
    is refused here, not at the first search. Every method's runs load alike, HIPS-ε's
    included (its hybrid search).
    """
    if not isinstance(path, str | Path):
        raise TypeError(f"path must be a run directory, checkpoint file or model name (str or Path), not "
                        f"{type(path).__name__}")  # fmt: skip
    if not isinstance(checkpoint, str | Path):
        raise TypeError(f"checkpoint must be 'best', 'last' or a file path, not {type(checkpoint).__name__}")
    if device is not None and not isinstance(device, str):
        raise TypeError(f"device must be 'cpu', 'cuda', 'auto' or None, not {type(device).__name__} {device!r}")
    if device is not None and device not in DEVICES:
        raise ConfigError(f"device must be {', '.join(DEVICES[:-1])} or {DEVICES[-1]}, got {device!r}")
    given, card = locate(path)
    if given.is_file() and given.suffix != ".safetensors":
        raise ConfigError(f"{given}: not a run directory or a checkpoint (.safetensors) file; sgps.load takes what "
                          "`sgps train` wrote")  # fmt: skip
    folder = given.parent.parent if given.is_file() else given
    if not (folder / "config.toml").is_file():
        raise ConfigError(f"{folder}: not a run directory (it has no config.toml)")
    return _searcher(Run.open(folder), given if given.is_file() else str(checkpoint), device, card)


def _searcher(run: Run, checkpoint: str | Path, device: str | None, card: ModelCard | None = None) -> Searcher:
    """`load`'s searcher of the opened `run` with the weights `checkpoint` names (or the file it is)."""
    try:  # cuda (given, or the run's own) on a machine without a CUDA device: refused now, not at the first search
        pick_device(device or run.device)
    except ConfigError as error:
        raise ConfigError(f"{run.path}: {error}; pass device='cpu' to search on the CPU") from None
    weights = checkpoint if isinstance(checkpoint, Path) else run.weights(checkpoint)
    try:  # its header names the networks it holds: a level file or trainer.pt is refused now, not at the first search
        recorded_architecture(weights)
    except CheckpointError as error:
        raise CheckpointError(f"{error}; load takes a run's weights: checkpoint='best', 'last' or a .safetensors "
                              "file that sgps train wrote") from None  # fmt: skip
    if card is not None:
        used = f"the weights of the model {card.name} (version {card.version})"
    elif isinstance(checkpoint, Path):
        used = f"the weights in {checkpoint}"
    else:
        used = describe_weights(run.path, checkpoint)
    return Searcher(run, weights, device, card=card, weights_used=used)


def train(
    problems: str | Path,
    out: str | Path,
    *,
    domain: str | None = None,
    algorithm: str | None = None,
    validation: str | Path | None = None,
    config: str | Path | None = None,
    preset: str | None = None,
    recipe: str | None = None,
    seed: int | None = None,
    device: str | None = None,
    workers: int | None = None,
    evaluator: str | None = None,
    evaluation_batch: int | None = None,
    precision: str | None = None,
    learning_precision: str | None = None,
    max_iterations: int | None = None,
    time_limit: float | None = None,
    max_expansions: int | None = None,
    failed_trees: bool | None = None,
    codebook_size: int | None = None,
    cluster_level: int | None = None,
    conditioning: str | None = None,
    codebook: str | None = None,
    mixture: str | None = None,
    levin_plus_one: bool | None = None,
    duplicates: str | None = None,
    loss: str | None = None,
    tensorboard: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    quiet: bool = False,
    threads: int | None = None,
    max_batches: int | None = None,
    session_minutes: float | None = None,
) -> TrainedRun:
    """Train on the levels in `problems` into the run directory `out`, as ``sgps train`` does.

    Every option is the command's flag of the same name (``time_limit`` in minutes);
    None keeps the value of the preset or the `config` TOML file. A path argument that is
    not a str or Path, or another argument of the wrong type, is a `TypeError` naming it,
    before anything is created.
    """
    problems_path, out_path = _path("problems", problems, "a level file or folder"), _path("out", out, "a folder")
    validation_path = None if validation is None else _path("validation", validation, "a level file or folder")
    config_path = None if config is None else _path("config", config, "a TOML file")
    if tensorboard is not None:
        _path("tensorboard", tensorboard, "a folder")
    threads, max_batches = _whole(threads), _whole(max_batches)
    if session_minutes is not None and (type(session_minutes) is bool or not isinstance(session_minutes, numbers.Real)):
        raise TypeError(f"session_minutes must be a number, not {type(session_minutes).__name__} {session_minutes!r}")
    session_minutes = None if session_minutes is None else float(session_minutes)
    check_session_minutes(session_minutes, "session_minutes=")
    for name, value, kind in (("domain", domain, str), ("preset", preset, str), ("threads", threads, int),
                              ("max_batches", max_batches, int), ("resume", resume, bool),
                              ("overwrite", overwrite, bool), ("quiet", quiet, bool)):  # fmt: skip
        _scalar(name, value, kind)
    options = {
        "algorithm": algorithm, "recipe": recipe, "device": device, "workers": workers, "seed": seed,
        "evaluator": evaluator,
        "evaluation_batch": evaluation_batch, "precision": precision,
        "learning_precision": learning_precision,
        "tensorboard": None if tensorboard is None else str(tensorboard),
        "max_iterations": max_iterations, "time_limit": time_limit, "max_expansions": max_expansions,
        "failed_trees": failed_trees,
        "codebook_size": codebook_size, "cluster_level": cluster_level, "conditioning": conditioning,
        "codebook": codebook, "mixture": mixture, "levin_plus_one": levin_plus_one, "duplicates": duplicates,
        "loss": loss,
    }  # fmt: skip
    # An integral number is an int (a numpy integer from a script's arrays too); any other value goes to the
    # setting's own check, whose message names the argument ("given as seed=").
    overrides = option_overrides({name: _whole(value) for name, value in options.items()})
    resolved, state = runner.train(
        problems_path,
        out_path,
        domain=domain,
        validation=validation_path,
        preset=preset,
        config_file=config_path,
        overrides=overrides,
        resume=resume,
        overwrite=overwrite,
        quiet=quiet,
        threads=threads,
        max_batches=max_batches,
        session_minutes=session_minutes,
        spell=lambda name: f"{name}=",
    )
    return TrainedRun(
        path=out_path,
        domain=resolved.run.domain,
        algorithm=resolved.run.algorithm,
        iterations=state.iteration,
        solved=len(state.solved),
        expansions=state.cumulative_expansions,
        best_validation=max(state.best_validation, 0),
        seconds=state.seconds,
    )


def fork(
    run: str | Path,
    out: str | Path,
    *,
    problems: str | Path | None = None,
    validation: str | Path | None = None,
    initial_budget: int | None = None,
    max_budget: int | None = None,
    schedule: str | None = None,
    checkpoint_every: int | None = None,
    solution_memory: int | None = None,
    validate_every: int | None = None,
    max_iterations: int | None = None,
    time_limit: float | None = None,
    max_expansions: int | None = None,
) -> Fork:
    """Fork the run folder `run` at its last checkpoint into the new folder `out`, as ``sgps fork`` does
    (`sgps.runs.fork`): the same networks, optimisers and problems, other budgets, limits or
    solution memory (`bootstrap.solution_memory`) or validations (`bootstrap.validate_every`).

    None keeps the parent's value. Go on with ``train(FORK/problems/train.txt, out, resume=True)``
    (`Fork.resume_command`).
    """
    paths = {"run": _path("run", run, "a run folder"), "out": _path("out", out, "a folder")}
    given = {name: None if value is None else _path(name, value, "a level file")
             for name, value in (("problems", problems), ("validation", validation))}  # fmt: skip
    counts = {name: _integer(name, value) for name, value in (
        ("initial_budget", initial_budget), ("max_budget", max_budget), ("checkpoint_every", checkpoint_every),
        ("solution_memory", solution_memory), ("validate_every", validate_every), ("max_iterations", max_iterations),
        ("max_expansions", max_expansions))}  # fmt: skip
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real)):
        raise TypeError(f"time_limit must be a number of minutes, not {type(time_limit).__name__} {time_limit!r}")
    minutes = None if time_limit is None else float(time_limit)
    changes = fork_changes(schedule=schedule, time_limit=minutes, **counts)
    return fork_run(paths["run"], paths["out"], changes, problems=given["problems"], validation=given["validation"])


def animate_test_solutions(
    run: str | Path | Run, problems: str | Path, out: str | Path, *, limit: int = 20, checkpoint: str = "best"
) -> list[Path]:
    """GIFs of the solutions the last ``sgps test`` of `problems` found: one per solved problem, at most `limit`.

    The test records which problems it solved, and with which budget, in
    ``RUN/metrics/test-NAME.csv``; the first `limit` of them (in problem order) are
    searched again in lockstep, which finds their solutions again without searching
    the unsolved problems, and each solution is drawn to ``OUT/<file>-<k>.gif``.
    Returns the files written. `run`: a run folder, or a run opened already (`Run`).
    """
    check_whole_number("limit", limit, 0, label="the GIF limit")
    limit = int(limit)
    folder = run.path if isinstance(run, Run) else _path("run", run, "a run directory")
    problems, out = _path("problems", problems, "a level file or folder"), _path("out", out, "a folder")
    record = record_name(problems)
    if not record_path(folder, problems).is_file():
        raise ConfigError(f"{folder} has no test record of {problems}; run `sgps test` on it first")
    rows = [row for row in RunDirectory(folder).read(record) if row["solved"] == "1"]
    chosen = sorted(rows, key=lambda row: int(row["problem"]))[:limit]
    if not chosen:
        return []
    searcher = _searcher(Run.of(run), checkpoint, None)
    levels = read_levels(problems, searcher.domain).levels
    picked = [levels[int(row["problem"])] for row in chosen]
    outcomes = searcher.solve_many(picked, budget=max(int(row["budget"]) for row in chosen))
    written = []
    for level, outcome in zip(picked, outcomes, strict=True):
        if outcome.states is not None:
            path = solution_gif_path(out, level)
            write_gif(path, searcher.domain, outcome.states)
            written.append(path)
    return written


def solution_gif_path(out: Path, level: Level) -> Path:
    """Where `animate_test_solutions` draws the solution of `level` in the folder `out`."""
    return out / f"{level.name.replace(':', '-')}.gif"


def _whole(value: Any) -> Any:
    """`value` as an `int` when it is an integral number (`numbers.Integral`: a numpy integer too, not a
    bool); any other value as it is, for the check of the argument it was given as."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def _integer(name: str, value: Any) -> int | None:
    """The integer argument `name` as an `int` (None: not given); a `TypeError` naming it unless it is
    an integral number (`_whole`)."""
    value = _whole(value)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(f"{name} must be a whole number, not {type(value).__name__} {value!r}")
    return value


def _scalar(name: str, value: Any, kind: type) -> None:
    """A `TypeError` naming the argument `name` unless `value` is None or a `kind` (a bool is no int)."""
    if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise TypeError(f"{name} must be a {kind.__name__}, not {type(value).__name__} {value!r}")


def _path(name: str, value: Any, what: str) -> Path:
    """The path argument `name` as a `Path`; a `TypeError` naming it unless it is a str or a Path."""
    if not isinstance(value, str | Path):
        raise TypeError(f"{name} must be {what} (str or Path), not {type(value).__name__} {value!r}")
    return Path(value)


def _outcome(result: SearchResult) -> SearchOutcome:
    return SearchOutcome(
        solved=result.solved,
        status=result.status,
        actions=result.actions,
        states=result.states,
        expansions=result.expanded,
        generated=result.generated,
        seconds=result.seconds,
    )


__all__ = ["Fork", "SearchOutcome", "Searcher", "TrainedRun", "animate_test_solutions", "fork", "load", "train"]
