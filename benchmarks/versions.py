"""Two versions of sgps on the same work, interleaved: evaluation calls and learning steps.

On a shared virtual machine the speed of a core drifts by 10-20% from minute to minute,
so two whole runs, one after the other, cannot show a 10% change. This runs an earlier
version (`--before`: a folder holding its ``sgps`` package, for instance ``src`` of a
``git worktree add /tmp/before COMMIT``) and this one in one process, on hard
BoulderDash at the `cpu` preset, one thread, with the same weights:

- evaluation: one lockstep search (budget `--budget`, 32 problems) records the batches
  of states the evaluator is asked for; both versions then answer every batch (observation
  and network, as in search), alternating which goes first, `--repeats` times. It prints
  the seconds of each, their ratio and whether every answer is bit-identical;
- learning: each version searches the same problems with its own code, then both learn
  from those results, from the same starting state, alternately, `--repeats` times. It
  prints the fastest step of each and whether the searches (expansions, solutions), the
  learning reports and the weights after the step are identical.

It exercises the evaluators and learners in one process, with code-vector conditioning;
the shared-memory transport of search processes and the other settings are left to the
tests (and to `sgps train` runs compared before and after).

The earlier package is copied to a temporary folder as ``sgps_before`` (its imports
rewritten), so both import side by side. Usage::

    git worktree add /tmp/before HEAD~1
    python benchmarks/versions.py --before /tmp/before/src [--algorithms phs,phs-sg]
                                  [--precisions float32,bfloat16] [--evaluation-batches 1,32]
"""

from __future__ import annotations

import argparse
import copy
import importlib
import itertools
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from sgps.domains import get_domain
from sgps.domains.generation import resolve_params
from sgps.search import search_lockstep
from sgps.training.config import resolve_config
from sgps.training.setup import build_method

SEARCHES = 32
IMPORT = re.compile(r"\b(from|import) sgps\b|\"sgps\.")


def import_before(source: Path, folder: Path) -> dict[str, ModuleType]:
    """The earlier version's modules this benchmark calls, imported as ``sgps_before``."""
    package = folder / "sgps_before"
    shutil.copytree(source / "sgps", package)
    for path in package.rglob("*.py"):
        text = path.read_text()
        path.write_text(IMPORT.sub(lambda m: m.group(0).replace("sgps", "sgps_before"), text))
    sys.path.insert(0, str(folder))
    names = ("domains", "domains.generation", "search", "training.config", "training.setup")
    return {name: importlib.import_module(f"sgps_before.{name}") for name in names}


def build(modules: dict[str, Any] | None, algorithm: str, precision: str) -> tuple[Any, list[Any], Any]:
    """Domain, 32 hard BoulderDash problems and an untrained method of one version (None: this
    one), searching and learning in `precision`."""
    get, params, config, setup = (
        (get_domain, resolve_params, resolve_config, build_method)
        if modules is None
        else (modules["domains"].get_domain, modules["domains.generation"].resolve_params,
              modules["training.config"].resolve_config, modules["training.setup"].build_method)
    )  # fmt: skip
    domain = get("boulderdash")
    levels = [domain.generate(seed, **params(domain, "hard")) for seed in range(SEARCHES)]
    overrides = {"run": {"algorithm": algorithm, "device": "cpu"}, "search": {"precision": precision},
                 "learner": {"precision": precision}}
    return domain, levels, setup(domain, levels[0], config("cpu", overrides=overrides))


def same_weights(a: Any, b: Any) -> bool:
    first, second = a.model_weights(), b.model_weights()
    return first.keys() == second.keys() and all(torch.equal(first[key], second[key]) for key in first)


def compare_evaluation(before: Any, after: Any, domain: Any, levels: list[Any], k: int, budget: int,
                       repeats: int) -> str:  # fmt: skip
    evaluators = {"before": before.evaluator(), "after": after.evaluator()}
    batches: list[list[Any]] = []

    def recording(states: Any) -> Any:
        batches.append(list(states))
        return evaluators["after"](states)

    search_lockstep(domain, levels, after.algorithm, recording, budget=budget, batch_size=k)
    seconds = dict.fromkeys(evaluators, 0.0)
    identical = True
    for _, (number, states) in itertools.product(range(repeats), enumerate(batches)):
        answers = {}
        for name in sorted(evaluators, reverse=number % 2 == 1):
            started = time.perf_counter()
            answers[name] = evaluators[name](states)
            seconds[name] += time.perf_counter() - started
        pairs = zip(answers["before"], answers["after"], strict=True)
        identical &= all((x is None and y is None) or np.array_equal(x, y) for x, y in pairs)
    states = sum(map(len, batches)) / len(batches)
    return (f"{len(batches):>6} {states:>7.0f} {seconds['before']:>9.2f} {seconds['after']:>8.2f} "
            f"{seconds['before'] / seconds['after']:>6.2f}x {'yes' if identical else 'NO':>9}")  # fmt: skip


def compare_learning(versions: dict[str, tuple[Any, list[Any], Any]], searches: dict[str, Any], budget: int,
                     repeats: int) -> str:  # fmt: skip
    results, starts = {}, {}
    for name, (domain, levels, method) in versions.items():
        results[name] = searches[name](domain, levels, method.algorithm, method.evaluator(), budget=budget,
                                       record_graph=True)  # fmt: skip
        starts[name] = copy.deepcopy(method.state_dict())
    best = dict.fromkeys(versions, float("inf"))
    reports: dict[str, Any] = {}
    for repeat in range(repeats):
        for name in sorted(versions, reverse=repeat % 2 == 1):
            domain, _, method = versions[name]
            method.load_state_dict(copy.deepcopy(starts[name]))
            started = time.perf_counter()
            reports[name] = method.learn(domain, results[name])
            best[name] = min(best[name], time.perf_counter() - started)
    searched = [[(r.expanded, r.status, r.actions) for r in results[name]] for name in versions]
    identical = (same_weights(versions["before"][2], versions["after"][2]) and searched[0] == searched[1]
                 and reports["before"] == reports["after"])  # fmt: skip
    ratio = f"{best['before'] / best['after']:>6.2f}x" if best["before"] >= 0.01 else "      -"  # nothing learnt
    return f"{best['before']:>9.2f} {best['after']:>8.2f} {ratio} {'yes' if identical else 'NO':>9}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="folder holding the earlier sgps package")
    parser.add_argument("--algorithms", default="phs,phs-sg")
    parser.add_argument("--precisions", default="float32,bfloat16")
    parser.add_argument("--evaluation-batches", default="1,32")
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not (args.before / "sgps" / "__init__.py").is_file():
        raise SystemExit(f"--before {args.before}: no sgps package there (give the folder that holds sgps/)")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        modules = import_before(args.before, Path(folder))
        searches = {"before": modules["search"].search_lockstep, "after": search_lockstep}
        print(f"before: {args.before}; hard BoulderDash, cpu preset, {SEARCHES} searches at budget {args.budget}, "
              f"one thread, {args.repeats} repeats; {torch.__version__}")  # fmt: skip
        print(f"{'evaluation':<26} {'calls':>6} {'states':>7} {'before s':>9} {'after s':>8} {'ratio':>7} "
              f"{'identical':>9}")  # fmt: skip
        algorithms, precisions = args.algorithms.split(","), args.precisions.split(",")
        for algorithm, precision in itertools.product(algorithms, precisions):
            domain, levels, after = build(None, algorithm, precision)
            before = build(modules, algorithm, precision)[2]
            before.load_model_weights(after.model_weights())
            for k in (int(k) for k in args.evaluation_batches.split(",")):
                row = compare_evaluation(before, after, domain, levels, k, args.budget, args.repeats)
                print(f"{algorithm}/{precision}/k{k}".ljust(26), row)
        print(f"\n{'learning step (fastest)':<26} {'before s':>9} {'after s':>8} {'ratio':>7} {'identical':>9}")
        for algorithm, precision in itertools.product(algorithms, precisions):
            versions = {"before": build(modules, algorithm, precision), "after": build(None, algorithm, precision)}
            versions["before"][2].load_model_weights(versions["after"][2].model_weights())
            row = compare_learning(versions, searches, args.budget, args.repeats)
            print(f"{algorithm}/{precision}".ljust(26), row)


if __name__ == "__main__":
    main()
