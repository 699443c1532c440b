"""Search throughput with a network: PHS*(π) and PHS*(π^SG) at the `cpu` preset, per domain and mode.

For each domain, algorithm (flat `phs`; `phs-sg` with code or state conditioning)
and evaluation mode (exact: batch 1; buffered-32; lockstep-32)
this prints expansions/s and evaluated states/s during search, the mean evaluation
batch the mode produced, the network's bare forward throughput (samples/s, inference
mode, observations ready) at that batch size, and

    search efficiency = evaluated states/s during search / bare forward samples/s

(1.0: the search costs nothing beyond inference). Target: >= 0.8 in lockstep mode.
For π^SG the "forward" is everything one evaluation runs: the K-code high-level and
conditional policies (and, with state conditioning, the K decoded subgoals), the
unconditional network and the mixture. It also prints the per-expansion cost ratio
phs-sg / phs, against the target of the compute-matched presets: <= 1.35x in lockstep-32.
The ratio is measured apart from the table, because one pass of each, one after the
other, swings from 1.0x to 1.8x on a shared VM: `--repeats` lockstep-32 passes of each
variant, interleaved in ABBA order from the same levels, and the median time per
expansion of each, split into the domain's observations, the network's evaluation
(observations to answers) and the rest (the engine). The networks are untrained
(randomly initialised): throughput does not depend on the weights. One thread is
used throughout. `--layouts nchw,channels-last` measures each memory layout of the
convolution trunks (`sgps.models.resnet.set_channels_last`; channels-last is the default) and
prints each layout's lockstep speed-up over the first.

`--floor` prints instead, per domain, π^SG's compute matching (docs/subgoals.md,
"Compute-matched π^SG"): the arithmetic of one evaluation (FLOPs per state, counted by
`sgps.models.cost`, the same on every machine) against PHS*(π)'s at the `cpu` preset and
at the `paper` preset (target: <= 1.2x; the paper's sizes give about 1.1x), the timed
ratio of bare forwards at batch 32, and the share of a π^SG evaluation's time spent in
convolutions (PyTorch profiler). Usage::

    python benchmarks/throughput.py [--domains tsp,boxworld] [--algorithms phs,phs-sg-code] [--budget 1000]
                                    [--layouts nchw,channels-last] [--floor]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from sgps.domains import domain_names, get_domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.models.resnet import set_channels_last
from sgps.search import BestFirstSearch, run, run_lockstep
from sgps.training.config import resolve_config
from sgps.training.setup import build_method, subgoal_flop_ratio

LOCKSTEP_N = 32
EFFICIENCY_TARGET = 0.8
MATCHED_FLOPS = 1.2  # π^SG / PHS*(π) arithmetic per evaluation (issue target; the paper's sizes: about 1.1)
MATCHED_COST = 1.35  # π^SG / PHS*(π) measured time per expansion in lockstep-32
MODES = ("exact", "buffered-32", "lockstep-32")
LAYOUTS = {"nchw": False, "channels-last": True}
#: Benchmarked variants: (run.algorithm, subgoal.conditioning).
VARIANTS = {
    "phs": ("phs", "code-vector"),
    "phs-sg-code": ("phs-sg", "code-vector"),
    "phs-sg-state": ("phs-sg", "decoded-state"),
}


class CountingEvaluator:
    """Wraps an evaluator to count its calls and evaluated states, and to time its two steps
    (the domain's observations, then the network's answers to them)."""

    def __init__(self, evaluator: Any) -> None:
        self.evaluator = evaluator
        self.calls = 0
        self.states = 0
        self.observing = 0.0
        self.evaluating = 0.0

    def __call__(self, states: Sequence[Any]) -> Any:
        self.calls += 1
        self.states += len(states)
        started = time.perf_counter()
        observations = self.evaluator.domain.observe(states)
        observed = time.perf_counter()
        answers = self.evaluator.evaluate_observations(observations)
        self.observing += observed - started
        self.evaluating += time.perf_counter() - observed
        return answers


def bare_forward(forward: Any, observations: torch.Tensor, batch: int, seconds: float = 1.0) -> float:
    """Samples/s of `forward` at `batch` (inference mode, observations ready)."""
    batch = max(1, min(batch, len(observations)))
    chunk = observations[:batch]
    done = 0
    with torch.inference_mode():
        forward(chunk)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            forward(chunk)
            done += batch
    return done / (time.perf_counter() - start)


def variant_method(domain: Any, levels: Sequence[Any], variant: str) -> Any:
    """The untrained method of `variant` at the `cpu` preset."""
    algorithm, conditioning = VARIANTS[variant]
    overrides = {"run": {"device": "cpu", "algorithm": algorithm}, "subgoal": {"conditioning": conditioning}}
    return build_method(domain, levels[0], resolve_config("cpu", overrides=overrides))


def lockstep_split(domain: Any, levels: Sequence[Any], method: Any, budget: int) -> tuple[float, float, float]:
    """One lockstep-32 pass: seconds per expansion in all, in the observations and in the network's evaluation."""
    evaluator = CountingEvaluator(method.evaluator())
    searches = [BestFirstSearch(domain, level, method.algorithm, budget=budget) for level in levels]
    start = time.perf_counter()
    results = run_lockstep(searches, evaluator)
    expanded = sum(result.expanded for result in results)
    return ((time.perf_counter() - start) / expanded, evaluator.observing / expanded,
            evaluator.evaluating / expanded)  # fmt: skip


def cost_ratio(name: str, variant: str, budget: int, seed: int, repeats: int) -> dict[str, tuple[float, ...]]:
    """Median (all, observations, network) seconds per expansion of `phs` and of `variant` in lockstep-32,
    from `repeats` passes of each interleaved in ABBA order (phs, variant, variant, phs, ...)."""
    domain = get_domain(name)
    levels = generate_levels(domain, resolve_params(domain, "standard"), seed, LOCKSTEP_N)
    methods = {key: variant_method(domain, levels, key) for key in ("phs", variant)}
    passes: dict[str, list[tuple[float, float, float]]] = {key: [] for key in methods}
    for repeat in range(repeats):
        order = ("phs", variant) if repeat % 2 == 0 else (variant, "phs")
        for key in order:
            passes[key].append(lockstep_split(domain, levels, methods[key], budget))
    return {key: tuple(statistics.median(part) for part in zip(*rows, strict=True)) for key, rows in passes.items()}


def measure(name: str, variant: str, budget: int, seed: int) -> list[tuple[str, float, float, float, float]]:
    """(mode, expansions/s, evaluated states/s, mean batch, efficiency) for one domain and variant."""
    domain = get_domain(name)
    levels = generate_levels(domain, resolve_params(domain, "standard"), seed, LOCKSTEP_N)
    algorithm, _ = VARIANTS[variant]
    method = variant_method(domain, levels, variant)
    evaluator_of_method = method.evaluator()
    if algorithm == "phs":
        network = method.learner.network.eval()
        forward = network
    else:
        model = method.model.eval()

        def forward(x: torch.Tensor) -> Any:
            return model(x, evaluator_of_method.alpha, evaluator_of_method.mixture)

    observations = torch.from_numpy(domain.observe(levels * 4))
    rows = []
    for mode in MODES:
        evaluator = CountingEvaluator(evaluator_of_method)
        start = time.perf_counter()
        if mode == "lockstep-32":
            searches = [BestFirstSearch(domain, level, method.algorithm, budget=budget) for level in levels]
            results = run_lockstep(searches, evaluator)
        else:
            batch = 1 if mode == "exact" else 32
            results = [
                run(BestFirstSearch(domain, level, method.algorithm, budget=budget, batch_size=batch), evaluator)
                for level in levels[:4]
            ]
        elapsed = time.perf_counter() - start
        expanded = sum(r.expanded for r in results)
        mean_batch = evaluator.states / evaluator.calls
        state_rate = evaluator.states / elapsed
        forward_rate = bare_forward(forward, observations, round(mean_batch))
        rows.append((mode, expanded / elapsed, state_rate, mean_batch, state_rate / forward_rate))
    return rows


def convolution_share(forward: Any, observations: torch.Tensor, repeats: int = 20) -> float:
    """The fraction of `forward`'s CPU time spent in convolutions (PyTorch profiler, self times)."""
    with torch.inference_mode():
        forward(observations)
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            for _ in range(repeats):
                forward(observations)
    events = profiler.key_averages()
    total = sum(event.self_cpu_time_total for event in events)
    return sum(event.self_cpu_time_total for event in events if "convolution" in event.key) / total


def matching_row(name: str, seed: int) -> tuple[float, float, float, float]:
    """(FLOP ratio at `cpu`, FLOP ratio at `paper`, timed forward ratio at batch 32, convolution share)."""
    domain = get_domain(name)
    levels = generate_levels(domain, resolve_params(domain, "standard"), seed, LOCKSTEP_N)
    observations = torch.from_numpy(domain.observe(levels))
    flat = build_method(domain, levels[0], resolve_config("cpu", overrides={"run": {"device": "cpu"}}))
    overrides = {"run": {"device": "cpu", "algorithm": "phs-sg"}}
    subgoal = build_method(domain, levels[0], resolve_config("cpu", overrides=overrides))
    network, model, evaluator = flat.learner.network.eval(), subgoal.model.eval(), subgoal.evaluator()

    def subgoal_forward(x: torch.Tensor) -> Any:
        return model(x, evaluator.alpha, evaluator.mixture)

    seconds = {key: 1 / bare_forward(forward, observations, LOCKSTEP_N)
               for key, forward in (("flat", network), ("subgoal", subgoal_forward))}  # fmt: skip
    return (subgoal_flop_ratio(domain, levels[:4], "cpu"), subgoal_flop_ratio(domain, levels[:2], "paper"),
            seconds["subgoal"] / seconds["flat"], convolution_share(subgoal_forward, observations))  # fmt: skip


def print_floors(names: Sequence[str], seed: int) -> None:
    """The `--floor` table: π^SG's compute matching per domain."""
    print(f"code conditioning; FLOPs counted per state; timed at batch 32, inference mode, one thread; "
          f"target FLOP ratio <= {MATCHED_FLOPS}x")  # fmt: skip
    print(f"{'domain':<12} {'FLOP ratio cpu':>14} {'FLOP ratio paper':>16} {'timed forward':>13} "
          f"{'π^SG convolutions':>17}")  # fmt: skip
    for name in names:
        cpu, paper, timed, convolutions = matching_row(name, seed)
        verdict = "" if cpu <= MATCHED_FLOPS else "  (over the target)"
        print(f"{name:<12} {cpu:>13.2f}x {paper:>15.2f}x {timed:>12.2f}x {convolutions:>17.1%}{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", default=",".join(domain_names()), help="comma-separated domain names")
    parser.add_argument("--algorithms", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument("--budget", type=int, default=1000, help="expansion budget per search")
    parser.add_argument("--seed", type=int, default=2000)
    parser.add_argument("--layouts", default="channels-last", help=f"comma-separated, from {', '.join(LAYOUTS)}")
    parser.add_argument("--floor", action="store_true", help="print π^SG's compute matching per domain (see above)")
    parser.add_argument("--repeats", type=int, default=6, help="interleaved lockstep passes of each for the ratio")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.floor:
        print_floors(args.domains.split(","), args.seed)
        return
    variants = args.algorithms.split(",")
    layouts = args.layouts.split(",")
    print(f"cpu preset, budget {args.budget}; target efficiency >= {EFFICIENCY_TARGET} in lockstep")
    print(f"{'domain':<12} {'algorithm':<13} {'layout':<14} {'mode':<12} {'exp/s':>9} {'states/s':>9} {'batch':>6} "
          f"{'efficiency':>10}")  # fmt: skip
    rates: dict[tuple[str, str, str, str], float] = {}
    for name in args.domains.split(","):
        for variant in variants:
            for layout in layouts:
                set_channels_last(LAYOUTS[layout])
                for mode, expansions, states, batch, efficiency in measure(name, variant, args.budget, args.seed):
                    rates[name, variant, layout, mode] = expansions
                    print(f"{name:<12} {variant:<13} {layout:<14} {mode:<12} {expansions:>9,.0f} {states:>9,.0f} "
                          f"{batch:>6.1f} {efficiency:>10.2f}")  # fmt: skip
    if "phs" in variants and len(variants) > 1:
        print(f"\nper-expansion cost in lockstep-32, median of {args.repeats} interleaved passes (µs per expansion: "
              "all = observations + network + engine), first layout")  # fmt: skip
        set_channels_last(LAYOUTS[layouts[0]])
        for name in args.domains.split(","):
            for variant in [v for v in variants if v != "phs"]:
                medians = cost_ratio(name, variant, args.budget, args.seed, args.repeats)
                for key, (whole, observing, evaluating) in medians.items():
                    print(f"{name:<12} {key:<13} {whole * 1e6:7.1f} = {observing * 1e6:5.1f} + {evaluating * 1e6:6.1f} "
                          f"+ {(whole - observing - evaluating) * 1e6:5.1f}")  # fmt: skip
                ratio = medians[variant][0] / medians["phs"][0]
                network = medians[variant][2] / medians["phs"][2]
                verdict = "met" if ratio <= MATCHED_COST else "missed"
                print(f"{name:<12} {variant:<13} ratio {ratio:.2f}x (network {network:.2f}x; "
                      f"target <= {MATCHED_COST}x: {verdict})")  # fmt: skip
    if len(layouts) > 1:
        print(f"\nlockstep-32 speed-up of each layout over {layouts[0]}")
        for name in args.domains.split(","):
            for variant in variants:
                base = rates[name, variant, layouts[0], "lockstep-32"]
                gains = "  ".join(f"{layout} {rates[name, variant, layout, 'lockstep-32'] / base:.2f}x"
                                  for layout in layouts[1:])  # fmt: skip
                print(f"{name:<12} {variant:<13} {gains}")

if __name__ == "__main__":
    main()
