"""Where the time of a Bootstrap batch goes with two processes: the cores, the pool, the learning step.

PHS*(π^SG) at the `cpu` preset on hard BoulderDash, 32 problems (the paper's batch), one
torch thread per process unless said otherwise. Three measurements:

1. **cores**: one process computing a 24 -> 24 convolution of 700 states for `--seconds`,
   then two processes at once: calls/s of each. Equal rates mean the machine's cores are
   whole cores (no shared vector units or memory limit at this size).
2. **pool**: a `SearchPool` of two workers, started as `sgps train --workers 2` starts
   it, searches the 32 problems in lockstep, `--repeats` times after a warm-up: the
   batch's wall seconds, each worker's search seconds (the longest search of its share,
   `SearchResult.seconds`) and exp/s; then one process searches the same 32, and each
   worker's share of 16 alone. The gap between the wall and the slower share's seconds
   is the pool's own cost (weights sent and loaded, each worker's evaluator set up,
   results and their search graphs sent back).
   Each line also gives the seconds this process spent in garbage collections. The pool's
   workers freeze their set-up (`sgps.training.setup.freeze_setup`: long-lived objects
   left out of full collections); the pool's batches are then repeated with this process's
   set-up frozen too, as `sgps train` has it, and so is the one process's search of the 32.
3. **learning**: the method's update from those searches (`Method.learn`, with the failed
   trees' graphs), from the same starting state, with one and with two torch threads,
   alternating, `--repeats` times: seconds of the whole and of its parts.

Usage::

    python benchmarks/pool_time.py [--precision bfloat16] [--evaluation-batch 32] [--budget 1000]
"""

from __future__ import annotations

import argparse
import copy
import gc
import multiprocessing
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

from sgps.domains import get_domain
from sgps.domains.generation import resolve_params
from sgps.search import search_lockstep
from sgps.training.config import resolve_config
from sgps.training.methods.subgoal.learner import SubgoalMethod
from sgps.training.runner import local_pool
from sgps.training.setup import build_method, freeze_setup

SEARCHES = 32
#: Seconds the two convolution processes are given to start before both begin timing.
STARTUP_SECONDS = 20.0
#: The learner's parts timed in measurement 3 (methods of `SubgoalLearner`).
LEARNER_PARTS = ("_train_vqvae", "_train_high", "_train_low", "_code_usage", "_high_entropy")


def convolution_rate(seconds: float, precision: str, start_at: float) -> float:
    """Calls/s of one 24 -> 24 convolution of 700 states of 14 x 14 in one thread, channels-last,
    timed from the wall-clock time `start_at` on (so that processes started apart time together)."""
    torch.set_num_threads(1)
    conv = torch.nn.Conv2d(24, 24, 3, padding=1).to(memory_format=torch.channels_last)
    states = torch.randn(700, 24, 14, 14).to(memory_format=torch.channels_last)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
        for _ in range(3):
            conv(states)
        time.sleep(max(0.0, start_at - time.time()))
        started, calls = time.perf_counter(), 0
        while time.perf_counter() - started < seconds:
            conv(states)
            calls += 1
    return calls / (time.perf_counter() - started)


def cores(seconds: float, precision: str) -> None:
    """Measurement 1: the convolution's rate in one process, then in two at once."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        alone = pool.apply(convolution_rate, (seconds, precision, 0.0))
    with context.Pool(2) as pool:
        start_at = time.time() + STARTUP_SECONDS  # both processes spawned and warm by then
        pair = pool.starmap(convolution_rate, [(seconds, precision, start_at)] * 2)
    print(f"cores: one process {alone:.1f} calls/s; two at once {pair[0]:.1f} and {pair[1]:.1f} calls/s")


class CollectionClock:
    """Seconds this process spends in garbage collections (a `gc.callbacks` entry), and how many
    of them were full collections."""

    def __init__(self) -> None:
        self.seconds, self.full, self._started = 0.0, 0, 0.0
        gc.callbacks.append(self._phase)

    def _phase(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.full += info["generation"] == 2

    def read(self) -> str:
        """What was spent since the last reading."""
        text = f"gc here {self.seconds:.3f} s ({self.full} full)"
        self.seconds, self.full = 0.0, 0
        return text


def timed_parts(method: SubgoalMethod) -> dict[str, list[float]]:
    """Wrap the learner's parts and the sample collection so that each call's seconds are recorded."""
    import sgps.training.methods.subgoal.learner as learner_module

    seconds: dict[str, list[float]] = defaultdict(list)

    def timed(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                seconds[name].append(time.perf_counter() - started)

        return wrapper

    for name in LEARNER_PARTS:
        setattr(method.learner, name, timed(name.removeprefix("_"), getattr(method.learner, name)))
    learner_module.collect_samples = timed("collect_samples", learner_module.collect_samples)
    learner_module.probe_low_policy = timed("probe", learner_module.probe_low_policy)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--precision", default="bfloat16", help="search and learning precision")
    parser.add_argument("--evaluation-batch", type=int, default=32)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="of each convolution loop")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"PHS*(π^SG), cpu preset, hard BoulderDash, {SEARCHES} problems, budget {args.budget}, "
          f"K = {args.evaluation_batch}, {args.precision}; torch {torch.__version__}", flush=True)  # fmt: skip
    cores(args.seconds, args.precision)

    domain = get_domain("boulderdash")
    levels = [domain.generate(seed, **resolve_params(domain, "hard")) for seed in range(SEARCHES)]
    config = resolve_config("cpu", overrides={
        "run": {"algorithm": "phs-sg", "device": "cpu", "evaluator": "per-process"},
        "search": {"precision": args.precision}, "learner": {"precision": args.precision},
    })  # fmt: skip
    method = build_method(domain, levels[0], config)
    assert isinstance(method, SubgoalMethod)
    options: dict[str, Any] = {"budget": args.budget, "batch_size": args.evaluation_batch, "record_graph": True}
    clock = CollectionClock()
    with local_pool(2, domain, levels[0], method, config) as pool:  # as `sgps train --workers 2` starts it
        pool.search(method, levels, epsilon=0.01, **options)
        for repeat in range(2 * args.repeats):
            if repeat == args.repeats:  # the training process's set-up frozen too, as `sgps train` has it
                freeze_setup()
                clock.read()
            started = time.perf_counter()
            results = pool.search(method, levels, epsilon=0.01, **options)
            wall = time.perf_counter() - started
            shares = [max(result.seconds for result in results[index::2]) for index in range(2)]
            frozen = ", set-up frozen" if repeat >= args.repeats else ""
            print(f"pool{frozen}: {wall:.2f} s a batch, its two shares searched in {shares[0]:.2f} and "
                  f"{shares[1]:.2f} s; {sum(r.expanded for r in results) / wall:,.0f} exp/s; {clock.read()}",
                  flush=True)  # fmt: skip
    gc.unfreeze()
    for name, shares in (("32 in lockstep", [levels]), ("each share of 16", [levels[::2], levels[1::2]]),
                         ("32 in lockstep, set-up frozen", [levels])):  # fmt: skip
        if name.endswith("frozen"):
            freeze_setup()
            clock.read()
        seconds, expanded = [], 0
        for share in shares:
            started = time.perf_counter()
            searched = search_lockstep(domain, share, method.algorithm, method.evaluator(), epsilon=0.01, **options)
            seconds.append(time.perf_counter() - started)
            expanded += sum(result.expanded for result in searched)
        if len(shares) == 1:
            results = searched  # the batch the learning step learns from
        print(f"one process, {name}: {' and '.join(f'{s:.2f}' for s in seconds)} s; "
              f"{expanded / sum(seconds):,.0f} exp/s; {clock.read()}", flush=True)  # fmt: skip
    start = copy.deepcopy(method.state_dict())
    parts = timed_parts(method)
    totals: dict[int, list[float]] = defaultdict(list)
    by_part: dict[int, dict[str, list[float]]] = {1: defaultdict(list), 2: defaultdict(list)}
    for _ in range(args.repeats):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            method.load_state_dict(copy.deepcopy(start))
            parts.clear()
            started = time.perf_counter()
            method.learn(domain, results)
            totals[threads].append(time.perf_counter() - started)
            for name, values in parts.items():
                by_part[threads][name].append(sum(values))
    for threads in (1, 2):
        medians = ", ".join(f"{name} {statistics.median(values):.2f}" for name, values in by_part[threads].items())
        print(f"learning, {threads} thread{'s' * (threads > 1)}: {statistics.median(totals[threads]):.2f} s "
              f"(median of {args.repeats}; {medians})")  # fmt: skip


if __name__ == "__main__":
    main()
