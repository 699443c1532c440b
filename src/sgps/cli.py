"""The ``sgps`` command line: argument parsing only; the work is done by the library.

Errors a user can act on (bad files, options, parameters) are printed as one line
``sgps: error: ...`` with exit status 2, never as a traceback; argparse's own errors
(an unknown option or choice) print the usage line first, then one such error line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import re
import shlex
import shutil
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from sgps import __version__
from sgps.api import animate_test_solutions, load, solution_gif_path
from sgps.domains import Level, LevelSet, get_domain, read_levels, solve, write_levels
from sgps.domains.animation import trajectory, write_gif
from sgps.domains.base import MAX_CELL
from sgps.domains.generation import MAX_LEVELS, generate_levels, resolve_params
from sgps.domains.render import write_png
from sgps.domains.solver import default_state_cap
from sgps.errors import ConfigError, SgpsError, StopRequested
from sgps.execution.placement import check_threads, usable_cores
from sgps.execution.pool import start_resource_tracker
from sgps.experiments import CompareOutcome, compare, write_report
from sgps.experiments.packing import describe_archive, pack, resume_command, unpack
from sgps.experiments.summary import terminal_summary
from sgps.models.precision import PRECISIONS
from sgps.outputs import COMPARISON, FOLDER, Output, check_outputs
from sgps.runs import runner
from sgps.runs.archive import DEFAULT_PART_BYTES, MIN_PART_BYTES
from sgps.runs.fork import fork_changes, fork_run
from sgps.runs.run import Run, describe_weights
from sgps.search import ALGORITHM_NAMES, DomainHeuristic, UniformPolicy, make_algorithm, search
from sgps.training.budget import SCHEDULES
from sgps.training.config import TRAIN_OPTIONS, check_options_apply, option_overrides
from sgps.training.methods.hips.dataset import build_dataset, dataset_journal, write_dataset
from sgps.training.methods.plugin import MethodPlugin
from sgps.training.plugins import PLUGINS, plugin_for
from sgps.training.recipes import RECIPE_CHOICES
from sgps.training.schema import EVALUATOR_PLACES
from sgps.zoo import available, locate

DEMO_DOMAINS = ("tsp", "boxworld", "sokoban", "craftworld", "boulderdash")
#: The comparison folder inside `sgps demo --out`.
DEMO_COMPARISON = "compare"
DEMO_CONFIG = Path(__file__).parent / "experiments" / "configs" / "demo.toml"
SOLVE_EPSILON, SOLVE_WEIGHT = 0.01, 1.5  # `solve --algorithm`: policy noise of levin/phs, the WA* weight
GIF_LIMIT = 20  # `test --gif`: GIFs written at most
MODEL_BUDGET, MODEL_ROUNDS = 4000, 8  # `solve --model RUN` without a card: the paper's test protocol
MAX_PIXELS = 2**26  # pixels of a picture (64 megapixels, 192 MiB of RGB)
PNG_CELL = 16  # `show --png`: pixels per cell unless --cell says otherwise


def _int(text: str) -> int:
    """An option's integer: ASCII digits, with a minus sign for the range check to name (`int` would
    also take '٣', '３', ' 3', '+3' and '1_0')."""
    if not re.fullmatch(r"-?[0-9]{1,4000}", text):  # int() takes at most 4,300 digits
        raise argparse.ArgumentTypeError(f"not a whole number (ASCII digits): {text!r}")
    return int(text)


def _path(text: str) -> Path:
    """A path option: an empty one would silently mean the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name a file or folder")
    return Path(text)


def _float(text: str) -> float:
    """An option's number in ASCII digits (`float` would also take '١.٥'); nan and inf pass, for the
    command's own range check to name."""
    decimal = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
    if not re.fullmatch(decimal, text.strip()) and text.strip().lower().lstrip("+-") not in ("nan", "inf", "infinity"):
        raise argparse.ArgumentTypeError(f"not a number (ASCII digits): {text!r}")
    return float(text)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand (each added by its own `_add_*_command`)."""
    parser = argparse.ArgumentParser(
        prog="sgps",
        description="Policy tree search guided by learned subgoals: domains, levels, solvers.",
    )
    parser.add_argument("--version", action="version", version=f"sgps {__version__}")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (a module that registers your own domains); repeatable",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in (
        _add_generate_command,
        _add_show_command,
        _add_solve_command,
        _add_dataset_command,
        _add_train_command,
        _add_test_command,
        _add_subgoals_command,
        _add_compare_command,
        _add_report_command,
        _add_pack_commands,
        _add_fork_command,
        _add_demo_command,
        _add_models_command,
    ):
        add_command(commands)
    return parser


def _add_generate_command(commands: Any) -> None:
    """`sgps generate`: a level set from a domain's generator."""
    generate = commands.add_parser("generate", help="generate a level set")
    generate.add_argument("domain", help="domain name")
    generate.add_argument("--variant", default="standard", help="generator variant (default: standard)")
    generate.add_argument(
        "--count", type=_int, default=10, help=f"number of levels, at most {MAX_LEVELS:,} (default: 10)"
    )
    generate.add_argument("--seed", type=_int, default=0, help="seed of the first level; level k uses seed+k")
    generate.add_argument("--out", required=True, type=_path, help="level file to write")
    generate.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="override a generator parameter"
    )
    generate.add_argument(
        "--goal",
        metavar="ITEM",
        help="fix the goal item (CraftWorld: bronze_pick, iron_pick, gem_ring; same as --param goal=ITEM)",
    )


def _add_show_command(commands: Any) -> None:
    """`sgps show`: print a level, or draw it."""
    show = commands.add_parser("show", help="print a level (and optionally draw it to PNG)")
    _add_level_arguments(show)
    show.add_argument("--png", type=_path, help="write a picture of the level to this PNG file")
    show.add_argument(
        "--cell", type=_int, help=f"pixels per cell in the PNG, at most {MAX_CELL} (default: {PNG_CELL})"
    )


def _add_solve_command(commands: Any) -> None:
    """`sgps solve`: the exact solver, or one best-first search."""
    solve_cmd = commands.add_parser(
        "solve", help="solve a level: the exact solver, or a best-first search with --algorithm"
    )
    _add_level_arguments(solve_cmd)
    solve_cmd.add_argument("--method", choices=("auto", "bfs", "astar"), help="exact solver method (default: auto)")
    solve_cmd.add_argument(
        "--max-states", type=_int, help="exact solver state cap (default: 2M, fewer on levels too large for 4 GiB)"
    )
    solve_cmd.add_argument(
        "--algorithm",
        choices=ALGORITHM_NAMES,
        help="run this best-first search instead (uniform policy; the domain heuristic where used)",
    )
    solve_cmd.add_argument("--budget", type=_int, help="expansion budget of --algorithm (default: none)")
    solve_cmd.add_argument("--epsilon", type=_float, help="policy noise of levin/phs (default: 0.01)")
    solve_cmd.add_argument("--weight", type=_float, help="WA* weight (default: 1.5)")
    solve_cmd.add_argument("--gif", type=_path, metavar="OUT.gif", help="animate the solution found to this GIF file")
    solve_cmd.add_argument(
        "--model", metavar="NAME",
        help="search with a pretrained model (`sgps models`) or a trained run folder: its budget doubled over "
        "--rounds rounds until solved (default: the model's test protocol)",
    )  # fmt: skip
    solve_cmd.add_argument("--rounds", type=_int, help="with --model: rounds, doubling the budget (default: 8)")


def _add_models_command(commands: Any) -> None:
    """`sgps models`: the pretrained models that install with the package."""
    models = commands.add_parser("models", help="list the pretrained models, or describe one")
    models.add_argument("name", nargs="?", help="describe this model: its card, files checked")


def _add_dataset_command(commands: Any) -> None:
    """`sgps dataset`: HIPS-ε's offline trajectories."""
    dataset = commands.add_parser(
        "dataset", help="solve training levels exactly and write their trajectories (HIPS-ε's offline data)"
    )
    dataset.add_argument("domain", help="domain name")
    dataset.add_argument("--problems", required=True, type=_path, help="training level file or folder")
    dataset.add_argument("--out", required=True, type=_path, help="dataset file to write (.npz)")
    dataset.add_argument(
        "--max-states", type=_int, help="exact solver state cap per level (default: 2M, fewer on large levels)"
    )
    dataset.add_argument(
        "--workers", type=_int, help="solver processes (default: one per usable core; 1: in this process)"
    )
    dataset.add_argument("--overwrite", action="store_true", help="replace a dataset already at --out")
    dataset.add_argument("--quiet", action="store_true", help="no progress bar (there is one only on a terminal)")


def _add_train_command(commands: Any) -> None:
    """`sgps train`: the Bootstrap loop (or HIPS-ε's offline training); the settings flags are `TRAIN_OPTIONS`."""
    train_cmd = commands.add_parser("train", help="train a policy / heuristic with the Bootstrap process")
    train_cmd.add_argument("--problems", type=_path, help="training level file or folder")
    train_cmd.add_argument("--dataset", type=_path, help="hips-eps: the trajectories `sgps dataset` wrote")
    train_cmd.add_argument(
        "--extra-problems", type=_path, metavar="FILE", help="hips-eps: more levels to solve and learn from"
    )
    train_cmd.add_argument("--out", required=True, type=_path, help="run directory")
    train_cmd.add_argument("--domain", help="domain of the level files (when they do not name it)")
    algorithms = [name for plugin in PLUGINS for name in plugin.algorithms]
    train_cmd.add_argument("--algorithm", choices=algorithms, help="default: phs")
    train_cmd.add_argument("--validation", type=_path, help="validation levels (default: a split of --problems)")
    train_cmd.add_argument("--config", type=_path, help="TOML file with [run] [network] [learner] [bootstrap]")
    train_cmd.add_argument("--preset", choices=("tiny", "cpu", "paper"), help="default: cpu")
    train_cmd.add_argument(
        "--recipe", choices=RECIPE_CHOICES,
        help="hard: budget 16,000 and a solution memory of 32 from the first batch; memory: the memory alone; "
        "paper: the paper's loop; default auto: hard on generated hard BoulderDash, memory on hard TSP, else paper",
    )  # fmt: skip
    train_cmd.add_argument("--seed", type=_int, help="run seed")
    train_cmd.add_argument("--device", choices=("cpu", "cuda", "auto"), help="default: auto")
    train_cmd.add_argument(
        "--workers", type=_int, help="search processes (default 0: one per core, one fewer around a shared evaluator; "
        "1: search in this process)"
    )
    train_cmd.add_argument(
        "--evaluator", choices=EVALUATOR_PLACES,
        help="with workers: one shared evaluator here, or a CPU model copy per process (default auto: shared on a GPU)",
    )  # fmt: skip
    train_cmd.add_argument(
        "--evaluation-batch", type=_int, metavar="K",
        help="children a search gathers per evaluation (1: exact order; 32: the reference trainer's; "
        "default 0: 1 on a CPU, 32 on a GPU)",
    )  # fmt: skip
    train_cmd.add_argument(
        "--precision", choices=PRECISIONS, help="number format of search evaluations (default: float32)"
    )
    train_cmd.add_argument(
        "--learning-precision", choices=PRECISIONS,
        help="number format of the learning step's arithmetic; weights stay float32 (default: float32)",
    )  # fmt: skip
    train_cmd.add_argument("--max-iterations", type=_int, help="passes over the training problems")
    train_cmd.add_argument("--time-limit", type=_float, metavar="MIN", help="wall-clock limit in minutes")
    train_cmd.add_argument(
        "--max-expansions", type=_int, metavar="N",
        help="training budget: stop once the run's expansions reach N (0: no limit); raise it on --resume to go on",
    )  # fmt: skip
    train_cmd.add_argument(
        "--levin-plus-one", action="store_true", default=None, help="LevinTS orders by (d+1)/π (the paper) not g/π"
    )
    train_cmd.add_argument(
        "--duplicates", choices=("eager", "lazy"), help="eager: first copy wins (default); lazy: the paper's closed set"
    )
    train_cmd.add_argument("--loss", choices=("levin", "improved-levin"), help="policy loss weighting (default: levin)")
    subgoal = train_cmd.add_argument_group("subgoal-guided policies (phs-sg, levin-sg)")
    subgoal.add_argument(
        "--no-failed-trees", dest="failed_trees", action="store_false", default=None,
        help="learn subgoals from solution paths only (the paper's ablation)",
    )  # fmt: skip
    subgoal.add_argument("--codebook-size", type=_int, metavar="K", help="number of subgoal codes (default: 4)")
    subgoal.add_argument(
        "--cluster-level", type=_int, metavar="L", help="hierarchy level pairs are drawn from (default 0: ⌊L/2⌋-1)"
    )
    subgoal.add_argument(
        "--conditioning", choices=("code-vector", "decoded-state", "code", "state"),
        help="condition on code vectors (default) or decoded subgoals; code/state: deprecated spellings",
    )  # fmt: skip
    subgoal.add_argument(
        "--codebook", choices=("standardised", "restart", "reference"),
        help="keep the codebook in use (default: standardised); reference: the EMA alone, which collapses",
    )  # fmt: skip
    subgoal.add_argument("--mixture", choices=("geometric", "arithmetic"), help="how π^SG mixes (default: geometric)")
    train_cmd.add_argument("--resume", action="store_true", help="continue the run in --out")
    train_cmd.add_argument(
        "--overwrite", action="store_true", help="replace the run files already in --out (default: refuse)"
    )
    train_cmd.add_argument("--quiet", action="store_true", help="no progress bar")
    train_cmd.add_argument(
        "--threads", type=_int, metavar="N",
        help="torch threads of this process (default: $OMP_NUM_THREADS, else usable cores / workers)",
    )  # fmt: skip
    train_cmd.add_argument(
        "--max-batches", type=_int, metavar="N", help="stop after N batches, resumable with --resume"
    )
    train_cmd.add_argument(
        "--session-minutes", type=_float, metavar="MIN",
        help="stop within MIN minutes, after a checkpoint, before a step that the run's recent ones say would "
             "end later; resumable with --resume",
    )  # fmt: skip
    train_cmd.add_argument(
        "--tensorboard", metavar="DIR", help="also log the run to TensorBoard event files in DIR (tensorboard extra)"
    )
    _add_executor_options(train_cmd, "where the searches run: local processes (default) or Ray actors")


def _add_test_command(commands: Any) -> None:
    """`sgps test`: the test procedure on a trained run."""
    test_cmd = commands.add_parser("test", help="test a trained run: budget doubling over rounds")
    test_cmd.add_argument("run", help="run directory, or a pretrained model's name (`sgps models`)")
    test_cmd.add_argument("--problems", required=True, type=_path, help="test level file or folder")
    test_cmd.add_argument("--budget", type=_int, default=4000, help="first-round budget (default: 4000)")
    test_cmd.add_argument("--rounds", type=_int, default=1, help="rounds, doubling the budget (default: 1)")
    test_cmd.add_argument("--checkpoint", default="best", help="best, last, or a checkpoint path (default: best)")
    test_cmd.add_argument("--gif", type=_path, metavar="DIR", help="animate each solved problem to DIR/NAME.gif")
    test_cmd.add_argument("--gif-limit", type=_int, metavar="N", help="with --gif: at most N GIFs (default: 20)")
    test_cmd.add_argument(
        "--workers", type=_int, metavar="N",
        help="local search processes, each round's problems split between them (default 1: in this process)",
    )  # fmt: skip
    test_cmd.add_argument(
        "--restart-rounds", action="store_true",
        help="search each round afresh, as the paper's procedure (same record; by default each problem's search "
             "goes on through its rounds, which saves nearly half the expansions of problems no round solves)",
    )  # fmt: skip
    _add_executor_options(test_cmd, "where the searches run: this process (default) or one Ray actor per CPU")
    test_cmd.add_argument(
        "--evaluation-batch", type=_int, default=1, metavar="K",
        help="children each search gathers before an evaluation (default: 1, exact best-first order, the "
             "test procedure's; the run's training value, e.g. 32, gives the reference trainer's order)",
    )  # fmt: skip
    test_cmd.add_argument("--quiet", action="store_true", help="no progress bar (there is one only on a terminal)")


def _add_subgoals_command(commands: Any) -> None:
    """`sgps subgoals`: the K subgoals a trained π^SG proposes."""
    subgoals = commands.add_parser("subgoals", help="draw a state beside the K subgoals a trained π^SG proposes")
    subgoals.add_argument(
        "run", help="run directory of a phs-sg or levin-sg run, or a pretrained model's name (`sgps models`)"
    )
    subgoals.add_argument("--problems", required=True, type=_path, help="level file or folder")
    subgoals.add_argument("--index", type=_int, default=0, help="which level, counting from 0 (default: 0)")
    subgoals.add_argument("--png", required=True, type=_path, help="picture to write")
    subgoals.add_argument("--checkpoint", default="best", help="best, last, or a checkpoint path (default: best)")


def _add_compare_command(commands: Any) -> None:
    """`sgps compare`: a comparison config, resumably."""
    compare_cmd = commands.add_parser(
        "compare", help="train and test every (algorithm, seed) of a comparison config, resumably"
    )
    compare_cmd.add_argument("config", type=_path, help="comparison config (TOML; see docs/experiments.md)")
    compare_cmd.add_argument(
        "--out", required=True, type=_path, metavar="DIR", help="comparison folder (run again to resume)"
    )
    compare_cmd.add_argument("--jobs", type=_int, metavar="N", help="runs at a time (default: one per usable core)")
    compare_cmd.add_argument("--threads", type=_int, metavar="N", help="threads per run (default: cores / jobs)")
    compare_cmd.add_argument(
        "--max-batches", type=_int, metavar="N", help="train each run N more batches at most, then stop (resumable)"
    )
    compare_cmd.add_argument(
        "--session-minutes", type=_float, metavar="MIN",
        help="stop within MIN minutes: each run pauses after a checkpoint, tests still running are stopped "
             "(resumable)",
    )  # fmt: skip
    compare_cmd.add_argument(
        "--tensorboard", action="store_true", help="log every run to TensorBoard in DIR/tensorboard/RUN (its extra)"
    )
    _add_executor_options(compare_cmd, "where the runs go: processes here (default) or Ray tasks on a cluster")


def _add_report_command(commands: Any) -> None:
    """`sgps report`: tables and curves of a comparison folder."""
    report_cmd = commands.add_parser("report", help="tables and learning curves of a comparison folder")
    report_cmd.add_argument("dir", type=_path, metavar="DIR", help="the folder `sgps compare` wrote")


def _add_pack_commands(commands: Any) -> None:
    """`sgps pack` and `sgps unpack`: a run or comparison folder as an archive, to go on on another machine."""
    pack_cmd = commands.add_parser(
        "pack", help="pack a run or comparison folder into an archive that resumes on another machine"
    )
    pack_cmd.add_argument("path", type=_path, metavar="PATH", help="a run folder (sgps train) or comparison folder")
    pack_cmd.add_argument("--out", type=_path, required=True, metavar="ARCHIVE",
                          help="the archive folder to write (archive.json and its parts)")  # fmt: skip
    pack_cmd.add_argument("--problems", type=_path, help="a run folder's training level file (it travels along)")
    pack_cmd.add_argument("--validation", type=_path, help="a run folder's validation level file, if it had one")
    pack_cmd.add_argument("--part-size", type=_int, default=DEFAULT_PART_BYTES // 2**20, metavar="MIB",
                          help="largest part of the archive, in MiB (default: %(default)s)")  # fmt: skip
    pack_cmd.add_argument("--overwrite", action="store_true", help="replace the archive at --out")
    unpack_cmd = commands.add_parser("unpack", help="unpack an archive of `sgps pack` into a new folder")
    unpack_cmd.add_argument("archive", type=_path, metavar="ARCHIVE", help="the archive folder")
    unpack_cmd.add_argument("--out", type=_path, required=True, metavar="DIR", help="the new folder to unpack into")


def _add_fork_command(commands: Any) -> None:
    """`sgps fork`: a run carried on from its last checkpoint in a new folder, under other budgets."""
    fork_cmd = commands.add_parser(
        "fork", help="carry a run on from its last checkpoint in a new folder, with other budgets or limits"
    )
    fork_cmd.add_argument("run", type=_path, metavar="RUN", help="the run folder to fork (left as it is)")
    fork_cmd.add_argument("--out", type=_path, required=True, metavar="DIR", help="the new run folder")
    fork_cmd.add_argument("--problems", type=_path,
                          help="the level file RUN was trained on (default: RUN/problems/train.txt)")  # fmt: skip
    fork_cmd.add_argument("--validation", type=_path, help="RUN's validation level file, if it had one")
    fork_cmd.add_argument("--initial-budget", type=_int, metavar="B",
                          help="the budget of the fork's next searches, and its schedule's B_0")  # fmt: skip
    fork_cmd.add_argument("--max-budget", type=_int, metavar="B", help="cap on the budget (0: none)")
    fork_cmd.add_argument("--schedule", choices=tuple(SCHEDULES), help="budget schedule from now on")
    fork_cmd.add_argument("--checkpoint-every", type=_int, metavar="N", help="batches between checkpoints")
    fork_cmd.add_argument("--solution-memory", type=_int, metavar="M",
                          help="earlier solutions each update learns from again (0: none, the paper's); the fork "
                          "keeps the latest M its parent remembered")  # fmt: skip
    fork_cmd.add_argument("--validate-every", type=_int, metavar="N",
                          help="batches between the validations inside a pass that choose the best weights "
                          "(0: at each pass end only, the paper's)")  # fmt: skip
    fork_cmd.add_argument("--max-expansions", type=_int, metavar="N", help="training budget in expansions, "
                          "counting the parent's (0: no limit)")  # fmt: skip
    fork_cmd.add_argument("--max-iterations", type=_int, metavar="N", help="passes over the training problems")
    fork_cmd.add_argument("--time-limit", type=_float, metavar="MIN", help="wall-clock limit in minutes")


def _add_demo_command(commands: Any) -> None:
    """`sgps demo`: solved levels of each domain, then a small comparison."""
    demo = commands.add_parser(
        "demo", help="draw solved levels of each domain, then compare PHS*(pi^SG) with PHS*(pi) on hard TSP"
    )
    demo.add_argument("--out", type=_path, default=Path("runs/demo"), help="output folder (default: runs/demo)")
    demo.add_argument("--seed", type=_int, default=0, help="seed of the first level (default: 0)")
    demo.add_argument("--count", type=_int, default=3, help="levels per domain (default: 3)")
    demo.add_argument(
        "--config",
        type=_path,
        default=DEMO_CONFIG,
        help="the comparison to run (default: PHS*(pi^SG) against PHS*(pi) on hard TSP, about 5 min)",
    )
    demo.add_argument("--no-train", dest="train", action="store_false", help="skip the comparison")


def _add_level_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=_path, help="level file or folder of level files")
    parser.add_argument("--domain", help="domain of the levels (needed unless the file names it)")
    parser.add_argument("--index", type=_int, default=0, help="which level, counting from 0 (default: 0)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    However a command ends, it says so in at most one line on stderr: an error (status 2),
    SIGTERM or SIGHUP (`STOP_SIGNALS`: 143, 129) or Ctrl-C (SIGINT, to the process or to its
    group: 130). As the program (`argv` None) it ignores Ctrl-C from the moment the command is
    over, whatever its outcome: the interpreter's exit that follows (stopping processes,
    freeing the model) must end neither in a traceback nor by the signal (Python restores
    the signal's default action while it exits), but with the command's own status.
    """
    try:
        warnings.formatwarning = _format_warning
        args = build_parser().parse_args(argv)
        with _stop_on_sigterm():
            _refuse_options_that_do_not_apply(args)
            for module in args.plugin:
                _load_plugin(module)
            return COMMANDS[args.command](args)
    except (StopRequested, SgpsError, OSError, KeyboardInterrupt) as error:
        if argv is None:  # before the line: a second Ctrl-C must not cut it short
            _ignore_interrupts()
        line, code = _outcome(error)
        print(line, file=sys.stderr)
        return code
    finally:
        if argv is None:
            _ignore_interrupts()


def _outcome(error: StopRequested | SgpsError | OSError | KeyboardInterrupt) -> tuple[str, int]:
    """The line a command that ended with `error` prints, and its exit status."""
    if isinstance(error, StopRequested):
        return f"sgps: stopped by {error.signal_name}", error.code
    if isinstance(error, SgpsError):
        return f"sgps: error: {error}", 2
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename else ""
        return f"sgps: error: {where}{error.strerror or error}", 2
    return "sgps: interrupted", 128 + signal.SIGINT


#: Signals that stop a command as Ctrl-C does (`StopRequested`, exit status 128 + the signal's number):
#: SIGTERM (143) and SIGHUP (129, the terminal closed).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _ignore_interrupts() -> None:
    """Ignore Ctrl-C from now on: the command is over, and the program exits (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into `StopRequested` while a command runs, so that it stops as Ctrl-C stops it:
    its search processes stopped, its locks released, a run resumable from its last checkpoint
    (the default action would end the process on the spot and leave its workers behind)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread; the caller keeps its own
        return

    def stop(number: int, _frame: object) -> None:
        for stopping in STOP_SIGNALS:  # a second one must not interrupt the clean-up
            signal.signal(stopping, signal.SIG_IGN)
        raise StopRequested(signal.Signals(number).name, 128 + number)

    previous = {number: signal.signal(number, stop) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)  # None: set from C


def _format_warning(message: Warning | str, category: type[Warning], *_: object, **__: object) -> str:
    """Warnings (e.g. deprecated option spellings) as one `sgps: warning:` line."""
    return f"sgps: warning: {message}\n"


#: Options that apply only together with another: (command, option, attribute, needed attribute, needed value
#: or None for "given", what to say). A given option whose condition fails is refused before anything runs.
NEEDS: tuple[tuple[str, str, str, str, Any, str], ...] = (
    ("solve", "--budget", "budget", "algorithm", None, "--algorithm (the exact solver has no budget)"),
    ("solve", "--epsilon", "epsilon", "algorithm", None, "--algorithm (levin or phs)"),
    ("solve", "--weight", "weight", "algorithm", "wastar", "--algorithm wastar"),
    ("show", "--cell", "cell", "png", None, "--png FILE"),
    ("test", "--gif-limit", "gif_limit", "gif", None, "--gif DIR"),
    ("test", "--workers", "workers", "executor", "local", "--executor local (Ray starts one actor per CPU)"),
    ("train", "--extra-problems", "extra_problems", "algorithm", "hips-eps", "--algorithm hips-eps"),
    *((command, "--ray-address", "ray_address", "executor", "ray", "--executor ray")
      for command in ("train", "test", "compare")),
)  # fmt: skip
#: Options of the exact solver, refused with `solve --algorithm`.
EXACT_SOLVER_OPTIONS = (("--method", "method"), ("--max-states", "max_states"))


def _refuse_options_that_do_not_apply(args: argparse.Namespace) -> None:
    """A `ConfigError` naming an option given where it has no effect (it would be ignored without a word)."""
    if args.command == "solve" and args.model is not None:
        for option, name in (("--algorithm", "algorithm"), ("--epsilon", "epsilon"), ("--weight", "weight"),
                             *EXACT_SOLVER_OPTIONS):  # fmt: skip
            if getattr(args, name) is not None:
                raise ConfigError(f"{option} does not apply with --model, which searches with the model's own "
                                  "algorithm and noise")  # fmt: skip
        return
    for command, option, name, needed, value, what in NEEDS:
        if args.command != command or getattr(args, name, None) is None:
            continue
        present = getattr(args, needed, None)
        if present is None or (value is not None and present != value):
            raise ConfigError(f"{option} applies only with {what}")
    if args.command == "solve" and args.rounds is not None:
        raise ConfigError("--rounds applies only with --model NAME")
    if args.command == "solve" and args.algorithm is not None:
        for option, name in EXACT_SOLVER_OPTIONS:
            if getattr(args, name) is not None:
                raise ConfigError(f"{option} is an option of the exact solver, not of --algorithm {args.algorithm}")
    if args.command == "test" and args.gif_limit is not None:  # before the test, not after it
        _check_range("--gif-limit", args.gif_limit, 0)


def _load_plugin(module: str) -> None:
    if not module.strip():
        raise ConfigError("--plugin needs a module name (e.g. --plugin mypackage.mydomain)")
    try:
        importlib.import_module(module)
    except (ImportError, ValueError, TypeError) as error:
        raise ConfigError(f"cannot import plugin module {module!r}: {error}") from None


def _parse_params(pairs: Sequence[str]) -> dict[str, str]:
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param expects KEY=VALUE, got {pair!r}")
        params[key.strip()] = value
    return params


def _check_range(option: str, value: int, low: int, high: int | None = None) -> None:
    """A `ConfigError` naming `option` unless `low` <= `value` (<= `high`)."""
    if value < low or (high is not None and value > high):
        allowed = f"from {low:,} to {high:,}" if high is not None else f"at least {low:,}"
        raise ConfigError(f"{option} must be {allowed}, got {value}")


def _pick_level(levels: LevelSet, index: int, file: Path) -> Level:
    if not 0 <= index < len(levels):
        raise ConfigError(f"{file} has {len(levels)} levels; --index {index} is out of range")
    return levels.levels[index]


def cmd_generate(args: argparse.Namespace) -> int:
    _check_range("--count", args.count, 1, MAX_LEVELS)
    _check_range("--seed", args.seed, 0)
    check_outputs([Output("--out", args.out)])
    domain = get_domain(args.domain)
    overrides = _parse_params(args.param)
    if args.goal is not None:
        overrides["goal"] = args.goal
    params = resolve_params(domain, args.variant, overrides)
    states = generate_levels(domain, params, args.seed, args.count)
    write_levels(args.out, domain, states, variant=args.variant, seed=args.seed, params=params)
    seeds = f"seeds {args.seed}-{args.seed + args.count - 1}"
    print(f"wrote {len(states)} {domain.name} levels ({args.variant}, {seeds}) to {args.out}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    if args.png is not None:
        check_outputs([Output("--png", args.png, suffix=".png")], [("level file", args.file)])
    levels = read_levels(args.file, args.domain)
    level = _pick_level(levels, args.index, args.file)
    domain = levels.domain
    print(f"{level.name}: {domain.describe(level.state)} (line {level.line} of {level.path})")
    print(domain.render_text(level.state))
    if args.png is not None:
        cell = PNG_CELL if args.cell is None else args.cell
        _check_range("--cell", cell, 1, MAX_CELL)
        _, rows, cols = domain.observation_shape(level.state)
        if rows * cols * cell**2 > MAX_PIXELS:
            raise ConfigError(
                f"--cell {cell} draws a {rows * cell:,}x{cols * cell:,} picture, more than "
                f"{MAX_PIXELS:,} pixels; use --cell {max(1, math.isqrt(MAX_PIXELS // (rows * cols)))} or less"
            )
        write_png(args.png, domain.render_image(level.state, cell))
        print(f"wrote {args.png}")
    return 0


def cmd_solve(args: argparse.Namespace) -> int:
    if args.gif is not None:
        check_outputs([Output("--gif", args.gif, suffix=".gif")], [("level file", args.file)])
    levels = read_levels(args.file, args.domain)
    level = _pick_level(levels, args.index, args.file)
    domain = levels.domain
    if args.model is not None:
        return _solve_with_model(args, levels, level)
    if args.algorithm is not None:
        return _best_first(args, domain, level)
    if args.max_states is not None:
        _check_range("--max-states", args.max_states, 1)
    cap = default_state_cap(domain, level.state) if args.max_states is None else args.max_states
    try:
        result = solve(domain, level.state, method=args.method or "auto", max_states=cap)
    except MemoryError:
        raise ConfigError(f"the exact solver ran out of memory; give a lower --max-states than {cap:,}") from None
    print(f"{level.name}: {domain.describe(level.state)} (line {level.line} of {level.path})")
    stats = f"{result.expanded:,} expanded, {result.stored:,} states, {result.seconds:.2f} s"
    if result.actions is None:
        capped = f"state cap reached ({cap:,} states; raise it with --max-states)"
        reason = capped if result.status == "cap" else "no solution exists"
        print(f"not solved: {reason} ({stats})")
        return 1
    print(f"optimal length: {result.length} ({stats})")
    print("actions: " + " ".join(domain.action_names[a] for a in result.actions))
    _solution_gif(args.gif, domain, level.state, result.actions)
    return 0


def _best_first(args: argparse.Namespace, domain: Any, level: Level) -> int:
    """`sgps solve --algorithm`: one exact-order search with a model-free evaluator."""
    if args.budget is not None and args.budget < 1:
        raise ConfigError("--budget must be at least 1")
    epsilon = SOLVE_EPSILON if args.epsilon is None else args.epsilon
    weight = SOLVE_WEIGHT if args.weight is None else args.weight
    if not 0.0 <= epsilon <= 1.0:
        raise ConfigError(f"--epsilon must be between 0 and 1, got {epsilon}")
    if not (math.isfinite(weight) and weight >= 0):
        raise ConfigError(f"--weight must be a finite number >= 0, got {weight}")
    try:
        algorithm = make_algorithm(args.algorithm, weight=weight)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    evaluator = DomainHeuristic(domain) if algorithm.uses_heuristic else UniformPolicy(domain)
    result = search(domain, level.state, algorithm, evaluator, budget=args.budget, epsilon=epsilon)
    print(f"{level.name}: {domain.describe(level.state)} (line {level.line} of {level.path})")
    print(
        f"{args.algorithm}: {result.status}, {result.expanded:,} expanded, {result.generated:,} generated, "
        f"length {result.length if result.solved else '-'} ({result.seconds:.2f} s)"
    )
    if result.actions is not None:
        print("actions: " + " ".join(domain.action_names[a] for a in result.actions))
        _solution_gif(args.gif, domain, level.state, result.actions)
    return 0 if result.solved else 1


def _solve_with_model(args: argparse.Namespace, levels: LevelSet, level: Level) -> int:
    """`sgps solve --model`: the model's trained search, its budget doubled each round until it solves."""
    folder, card = locate(args.model)
    if card is not None:
        card.check_level(levels.domain.name, levels.domain.observation_shape(level.state), str(args.file))
    protocol = card.tests[0] if card is not None and card.tests else None
    budget = args.budget if args.budget is not None else protocol.budget if protocol else MODEL_BUDGET
    rounds = args.rounds if args.rounds is not None else protocol.rounds if protocol else MODEL_ROUNDS
    _check_range("--budget", budget, 1)
    _check_range("--rounds", rounds, 1, 40)
    searcher = load(folder)
    name = card.name if card is not None else str(folder)
    print(f"{level.name}: {levels.domain.describe(level.state)} (line {level.line} of {level.path})")
    print(f"{name}: {searcher.algorithm} with {searcher.weights_used}")
    spent = 0
    for round_number in range(rounds):
        round_budget = budget * 2**round_number
        outcome = searcher.solve(level, budget=round_budget)
        spent += outcome.expansions
        if outcome.solved:
            print(f"solved at budget {round_budget:,}: {outcome.expansions:,} expanded, length {outcome.length} "
                  f"({outcome.seconds:.2f} s; {spent:,} expanded in all)")  # fmt: skip
            print("actions: " + " ".join(levels.domain.action_names[a] for a in outcome.actions))
            _solution_gif(args.gif, levels.domain, level.state, outcome.actions)
            return 0
    print(f"not solved within budget {budget * 2 ** (rounds - 1):,} ({spent:,} expanded in all); "
          "give more --rounds or a larger --budget")  # fmt: skip
    return 1


def cmd_models(args: argparse.Namespace) -> int:
    if args.name is None:
        cards = available()
        if not cards:
            print("no pretrained models are installed")
        for card in cards:
            print(card.one_line())
        return 0
    _, card = locate(args.name)
    if card is None:
        raise ConfigError(f"{args.name}: not a model name (models: {', '.join(c.name for c in available())})")
    print(f"{card.name} (version {card.version}): {card.summary}")
    print(f"  levels:   {card.domain}, variant {card.variant}, observed as {card.size} cells")
    stored = "float32, as trained" if card.precision == "float32" else f"{card.precision}, rounded from float32"
    print(f"  method:   {card.algorithm}, {card.preset} preset; weights {stored}")
    print(f"  recipe:   {card.recipe}")
    training = card.training
    print(f"  training: {training.get('problems')}; {int(training.get('expansions', 0)):,} expansions, "
          f"{int(training.get('solved', 0)):,} solved")  # fmt: skip
    for test in card.tests:
        print(f"  test {test.name}: {test.levels}: {test.line()}")
    print(f"  made by sgps {card.sgps_version} on {card.made}; files match their checksums ({card.folder})")
    return 0


def _solution_gif(path: Path | None, domain: Any, start: Any, actions: Sequence[int]) -> None:
    """`--gif`: animate a solution, one frame per state."""
    if path is not None:
        write_gif(path, domain, trajectory(domain, start, actions))
        print(f"wrote {path}")


def _add_executor_options(command: argparse.ArgumentParser, help_text: str) -> None:
    command.add_argument("--executor", choices=("local", "ray"), default="local", help=help_text)
    command.add_argument(
        "--ray-address", metavar="ADDR",
        help="with --executor ray: the cluster to join (auto, or HOST:PORT of `ray start --head`); "
        "default: start Ray on this machine",
    )  # fmt: skip


def _missing_ancestor(path: Path) -> Path | None:
    """The outermost folder above `path` that does not exist yet (None: its parent exists)."""
    missing = None
    for parent in path.absolute().parents:
        if parent.exists():
            return missing
        missing = parent
    return missing


def cmd_dataset(args: argparse.Namespace) -> int:
    """Solve every level of --problems with the exact solver and write the solved ones' trajectories."""
    if args.max_states is not None:
        _check_range("--max-states", args.max_states, 1)
    if args.workers is not None:
        _check_range("--workers", args.workers, 1, 1024)
    check_outputs([Output("--out", args.out)], [("--problems", args.problems)])  # a file name, before its journal's
    journal = dataset_journal(args.out)  # what an interrupted build goes on from; without one a dataset is finished
    check_outputs([Output("--out", args.out, result=not journal.exists()), Output("its journal", journal)],
                  [("--problems", args.problems)], overwrite=args.overwrite)  # fmt: skip
    levels = read_levels(args.problems, args.domain)
    levels.observation_shape()  # HIPS-ε's networks read one level size, as the other methods' do
    created = _missing_ancestor(args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)  # the journal goes beside the dataset from the start
    workers = args.workers or usable_cores()
    if workers > 1:  # before the solver pool's semaphores: the tracker that removes them must outlive a SIGHUP
        start_resource_tracker()
    with tqdm(total=len(levels), unit="level", desc="solving", leave=False, disable=_bar_off(args.quiet)) as bar:

        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)

        built = build_dataset(levels.domain, levels.levels, max_states=args.max_states, progress=progress,
                              workers=workers, journal=journal)  # fmt: skip
    for name, reason in built.skipped:
        print(f"skipped {name}: {reason}")
    if not built.dataset.trajectories:
        journal.unlink(missing_ok=True)  # a refusal leaves the disk as it was
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise ConfigError(f"{args.problems}: the solver finished none of the {len(levels)} levels; nothing written")
    write_dataset(args.out, built.dataset)
    journal.unlink()
    print(f"wrote {len(built.dataset.trajectories)} trajectories ({built.dataset.transitions:,} transitions, "
          f"{len(built.skipped)} levels skipped) -> {args.out}")  # fmt: skip
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    plugin = plugin_for(args.algorithm or "phs")
    if not plugin.bootstrap:
        return _train_offline(args, plugin)
    if args.dataset is not None:
        offline = ", ".join(name for other in PLUGINS if not other.bootstrap for name in other.algorithms)
        raise ConfigError(f"--dataset is for --algorithm {offline}; {args.algorithm or 'phs'} learns from --problems")
    if args.problems is None:
        raise ConfigError("--problems is required: the training levels")
    overrides = option_overrides({name: getattr(args, name) for name in TRAIN_OPTIONS})
    config, state = runner.train(
        args.problems,
        args.out,
        domain=args.domain,
        validation=args.validation,
        preset=args.preset,
        config_file=args.config,
        overrides=overrides,
        resume=args.resume,
        overwrite=args.overwrite,
        quiet=args.quiet,
        threads=args.threads,
        max_batches=args.max_batches,
        session_minutes=args.session_minutes,
        executor=args.executor,
        ray_address=args.ray_address,
    )
    print(
        f"trained {config.run.algorithm} on {config.run.domain}: {state.iteration} iterations, "
        f"{len(state.solved)} training problems solved, {state.cumulative_expansions:,} expansions, "
        f"best validation {max(state.best_validation, 0)} solved, budget now {state.train_budget:,} "
        f"(recipe {config.run.recipe}), "
        f"{state.seconds:.0f} s -> {args.out}"
    )
    if not state.finished:
        print(f"paused; go on with: {shlex.join(_resume_train_command(args))}")
    return 0


def _resume_train_command(args: argparse.Namespace) -> list[str]:
    """The `sgps train --resume` that goes on with the run `args` trained: its plugins, problems and executor."""
    command = ["sgps", *(arg for module in args.plugin for arg in ("--plugin", module)), "train",
               "--problems", str(args.problems)]  # fmt: skip
    if args.validation is not None:
        command += ["--validation", str(args.validation)]
    command += ["--out", str(args.out), "--resume"]
    if args.executor == "ray":
        command += ["--executor", "ray", *(["--ray-address", args.ray_address] if args.ray_address else [])]
    return command


def _train_offline(args: argparse.Namespace, plugin: MethodPlugin) -> int:
    """`sgps train --algorithm hips-eps --dataset DATA`: a method that learns offline, without the Bootstrap loop."""
    if (args.dataset is None) == (args.problems is None):
        raise ConfigError(f"--algorithm {args.algorithm} learns offline: give --dataset (written by `sgps dataset`) "
                          "or --problems (solved first with the exact solver)")  # fmt: skip
    ignored = [name for name, value in (("--validation", args.validation), ("--resume", args.resume),
               ("--executor ray", args.executor == "ray"), ("--max-batches", args.max_batches),
               ("--session-minutes", args.session_minutes)) if value is not None and value is not False]  # fmt: skip
    if ignored:
        unused = ", ".join(ignored)
        raise ConfigError(f"{unused}: not used by --algorithm {args.algorithm}, which learns offline")
    check_options_apply(args.algorithm, [name for name in TRAIN_OPTIONS if getattr(args, name) is not None])
    if args.threads is not None:
        check_threads(args.threads)
    assert plugin.train_offline is not None
    settings, count = plugin.train_offline(args.dataset, args.out, problems=args.problems, domain=args.domain,
                                           preset=args.preset or "cpu", extra_problems=args.extra_problems,
                                           config_file=args.config, seed=args.seed or 0, device=args.device or "cpu",
                                           overwrite=args.overwrite, threads=args.threads)  # fmt: skip
    print(f"trained {args.algorithm} on {count} trajectories (K = {settings.codebook_size}) -> {args.out}")
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    folder, card = locate(args.run)
    if card is not None and args.gif is not None:
        raise ConfigError(f"--gif animates the solutions of a test record, and a model ({card.name}) keeps none; "
                          f"animate a level with `sgps solve FILE --model {card.name} --gif OUT.gif`")  # fmt: skip
    if args.gif is not None:
        check_outputs([Output("--gif", args.gif, FOLDER)], [("run", folder), ("--problems", args.problems)])
    workers = 1 if args.workers is None else args.workers
    runner.check_test_request(args.budget, args.rounds, workers, args.executor, args.evaluation_batch)
    run = Run.open(folder)  # read once, for the test and the GIFs
    if args.gif is not None:  # every GIF it may draw, before the search writes its record
        gifs = [Output("--gif", solution_gif_path(args.gif, level), suffix=".gif")
                for level in read_levels(args.problems, run.domain).levels]  # fmt: skip
        check_outputs(gifs, [("run", folder), ("--problems", args.problems)])
    if card is not None:
        levels = read_levels(args.problems, run.domain)
        card.check_level(levels.domain.name, levels.observation_shape(), str(args.problems))
    if card is not None:
        print(f"testing the model {card.name} (version {card.version}) with its weights; nothing is recorded")
    else:
        print(f"testing {folder} with {describe_weights(folder, args.checkpoint)}")
    with tqdm(unit="search", leave=False, disable=_bar_off(args.quiet), delay=1.0) as bar:  # after a second

        def progress(stage: str, finished: int, *, total: int) -> None:
            if finished == 0:  # a stage starts
                bar.reset(total=total)
                bar.set_description(f"test {stage}", refresh=False)
            bar.update(finished - bar.n)  # throttled by tqdm, and shown only after its delay

        summary = runner.test(run, args.problems, budget=args.budget, rounds=args.rounds,
                              checkpoint=args.checkpoint, executor=args.executor, ray_address=args.ray_address,
                              progress=progress, workers=workers, record=card is None,
                              restart_rounds=args.restart_rounds, evaluation_batch=args.evaluation_batch)  # fmt: skip
    print(summary.table_row())
    if args.gif is not None:
        limit = GIF_LIMIT if args.gif_limit is None else args.gif_limit
        written = animate_test_solutions(run, args.problems, args.gif, limit=limit, checkpoint=args.checkpoint)
        print(f"wrote {len(written)} GIFs to {args.gif}")
    return 0


def cmd_subgoals(args: argparse.Namespace) -> int:
    folder, card = locate(args.run)
    check_outputs([Output("--png", args.png, suffix=".png")], [("--problems", args.problems), ("run", folder)])
    if card is not None:
        levels = read_levels(args.problems, card.domain)
        card.check_level(levels.domain.name, levels.observation_shape(), str(args.problems))
    view = runner.subgoals(folder, args.problems, index=args.index, checkpoint=args.checkpoint)
    write_png(args.png, view.figure())
    ranked = sorted(enumerate(view.probabilities), key=lambda item: -item[1])
    print("  ".join(f"code {k}: p={p:.3f}" for k, p in ranked) + f" -> {args.png}")
    if view.usage_line():
        print(view.usage_line())
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    outcome = compare(args.config, args.out, jobs=args.jobs, threads=args.threads, max_batches=args.max_batches,
                      session_minutes=args.session_minutes, plugins=args.plugin, executor=args.executor,
                      ray_address=args.ray_address, tensorboard=args.tensorboard)  # fmt: skip
    print(outcome.summary())
    _print_warnings(outcome)
    failure = outcome.failure()
    if failure is not None:
        print(f"sgps: error: {failure}", file=sys.stderr)
        return 1
    return 0


def _print_warnings(outcome: CompareOutcome) -> None:
    """Name the runs a guard cut (their comparison is not decided) and the test records not counted, on stderr."""
    for warning in outcome.warnings():
        print(f"sgps: warning: {warning}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    written = write_report(args.dir)
    for warning in written.warnings:
        print(f"sgps: warning: {warning}", file=sys.stderr)
    print(f"wrote {written.path}, {args.dir / 'curves.png'} and {args.dir / 'curves.csv'}")
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    _check_range("--part-size", args.part_size, MIN_PART_BYTES // 2**20, 2**20)
    index = pack(args.path, args.out, problems=args.problems, validation=args.validation,
                 part_bytes=args.part_size * 2**20, overwrite=args.overwrite)  # fmt: skip
    size = sum(int(part["bytes"]) for part in index.parts) / 2**20
    print(f"packed the {index.kind} {args.path} into {args.out}: {len(index.parts)} part(s), {size:.1f} MiB")
    for line in describe_archive(index):
        print(f"  {line}")
    return 0


def cmd_unpack(args: argparse.Namespace) -> int:
    index = unpack(args.archive, args.out)
    print(f"unpacked the {index.kind} packed on {index.packed.get('at')} ({index.packed.get('host')}) into {args.out}")
    for line in describe_archive(index):
        print(f"  {line}")
    print(f"go on with: {resume_command(index, args.out)}")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    changes = fork_changes(initial_budget=args.initial_budget, max_budget=args.max_budget, schedule=args.schedule,
                           checkpoint_every=args.checkpoint_every, solution_memory=args.solution_memory,
                           validate_every=args.validate_every, max_iterations=args.max_iterations,
                           time_limit=args.time_limit, max_expansions=args.max_expansions)  # fmt: skip
    made = fork_run(args.run, args.out, changes, problems=args.problems, validation=args.validation)
    print(f"forked {args.run} at {made.expansions:,} expansions (iteration {made.iteration}, batch "
          f"{made.next_batch}) into {args.out}: {'; '.join(made.changes) or 'no setting changed'}; next training "
          f"budget {made.budget:,}")  # fmt: skip
    print(f"go on with: {made.resume_command()}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Generate a few levels of each domain, solve the first exactly, draw its solution; then a small comparison."""
    _check_range("--count", args.count, 1, MAX_LEVELS)
    _check_range("--seed", args.seed, 0)
    out: Path = args.out
    outputs = [Output("--out", out, FOLDER)]  # and, checked before the first file is written, what goes in it:
    outputs += [Output("--out", out / name, suffix=suffix) for name, suffix in _demo_files()]
    if args.train:
        outputs.append(Output("--out", out / DEMO_COMPARISON, FOLDER, owner=COMPARISON))
    check_outputs(outputs, [("--config", args.config)])
    for name in DEMO_DOMAINS:
        domain = get_domain(name)
        params = resolve_params(domain, "standard")
        states = generate_levels(domain, params, args.seed, args.count)
        level_file = out / f"{name}.txt"
        write_levels(level_file, domain, states, variant="standard", seed=args.seed, params=params)
        result = solve(domain, states[0])
        if result.actions is None:
            print(f"{name}: level 0 not solved ({result.status})")
            continue
        trajectory = [states[0]]
        for action in result.actions:
            trajectory.append(domain.step(trajectory[-1], action))
        picture = out / f"{name}-solution.png"
        write_png(picture, film_strip(domain, trajectory))
        print(
            f"{name:11s} {len(states)} levels -> {level_file}; level 0 solved optimally in "
            f"{result.length} moves ({result.seconds:.2f} s); picture -> {picture}"
        )
    if args.train:
        _demo_comparison(out, args.config)
    return 0


def _bar_off(quiet: bool) -> bool | None:
    """tqdm's `disable` for a command's progress bar: off with --quiet, else drawn on a terminal only."""
    return True if quiet else None


def _demo_files() -> list[tuple[str, str]]:
    """The files `sgps demo` writes in its folder, with the suffix each name must end in."""
    return [(f"{name}{ending}", suffix) for name in DEMO_DOMAINS
            for ending, suffix in ((".txt", ""), ("-solution.png", ".png"))]  # fmt: skip


def _demo_comparison(out: Path, config: Path) -> None:
    """Run the comparison `config` (default: PHS*(π^SG) against PHS*(π) on hard TSP) and print its table."""
    folder = out / DEMO_COMPARISON
    print(f"comparing the algorithms of {config} -> {folder} (again on the same folder: finished runs are kept)")
    outcome = compare(config, folder)
    failure = outcome.failure()
    if failure is not None:
        raise SgpsError(failure)
    _print_warnings(outcome)
    report = write_report(folder).path  # its warnings: those of the comparison, printed above
    print()
    print(terminal_summary(folder))
    print(f"\nreport: {report}; learning curves: {folder / 'curves.png'}")


def film_strip(domain: Any, trajectory: Sequence[Any], frames: int = 6, cell: int = 12) -> np.ndarray:
    """Evenly spaced frames of a trajectory side by side (always the first and last)."""
    count = min(frames, len(trajectory))
    picks = sorted({round(i * (len(trajectory) - 1) / max(count - 1, 1)) for i in range(count)})
    images = [domain.render_image(trajectory[i], cell) for i in picks]
    gap = np.full((images[0].shape[0], cell, 3), 255, dtype=np.uint8)
    parts = [part for image in images for part in (image, gap)][:-1]
    return np.concatenate(parts, axis=1)


COMMANDS = {
    "dataset": cmd_dataset,
    "generate": cmd_generate,
    "show": cmd_show,
    "solve": cmd_solve,
    "train": cmd_train,
    "test": cmd_test,
    "subgoals": cmd_subgoals,
    "compare": cmd_compare,
    "report": cmd_report,
    "pack": cmd_pack,
    "unpack": cmd_unpack,
    "fork": cmd_fork,
    "demo": cmd_demo,
    "models": cmd_models,
}

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
