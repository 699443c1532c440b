"""Search throughput with a network: flat PHS*(π) at the `cpu` preset, per domain and mode.

For each domain and each evaluation mode (exact: batch 1; buffered-32; lockstep-32)
this prints expansions/s and evaluated states/s during search, the mean evaluation
batch the mode produced, the network's bare forward throughput (samples/s, inference
mode, observations ready) at that batch size, and

    search efficiency = evaluated states/s during search / bare forward samples/s

(1.0: the search costs nothing beyond inference). Target: >= 0.8 in lockstep mode.
The network is untrained (randomly initialised): throughput does not depend on the
weights. One thread is used throughout. Usage::

    python benchmarks/throughput.py [--domains tsp,boxworld] [--budget 1000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import torch

from sgps.domains import domain_names, get_domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.search import BestFirstSearch, run, run_lockstep
from sgps.training.config import resolve_config
from sgps.training.setup import build_flat_method

LOCKSTEP_N = 32
EFFICIENCY_TARGET = 0.8


class CountingEvaluator:
    """Wraps an evaluator to count its calls and evaluated states."""

    def __init__(self, evaluator: Any) -> None:
        self.evaluator = evaluator
        self.calls = 0
        self.states = 0

    def __call__(self, states: Sequence[Any]) -> Any:
        self.calls += 1
        self.states += len(states)
        return self.evaluator(states)


def bare_forward(network: torch.nn.Module, observations: torch.Tensor, batch: int, seconds: float = 1.0) -> float:
    """Samples/s of the network's forward pass at `batch` (inference mode, observations ready)."""
    batch = max(1, min(batch, len(observations)))
    chunk = observations[:batch]
    network.eval()
    done = 0
    with torch.inference_mode():
        network(chunk)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            network(chunk)
            done += batch
    return done / (time.perf_counter() - start)


def measure(name: str, budget: int, seed: int) -> list[tuple[str, float, float, float, float]]:
    """(mode, expansions/s, evaluated states/s, mean batch, efficiency) for one domain."""
    domain = get_domain(name)
    levels = generate_levels(domain, resolve_params(domain, "standard"), seed, LOCKSTEP_N)
    config = resolve_config("cpu", overrides={"run": {"device": "cpu"}})
    method = build_flat_method(domain, levels[0], config)
    network = method.learner.network
    observations = torch.from_numpy(domain.observe(levels * 4))
    rows = []
    for mode in ("exact", "buffered-32", "lockstep-32"):
        evaluator = CountingEvaluator(method.evaluator())
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
        forward = bare_forward(network, observations, round(mean_batch))
        rows.append((mode, expanded / elapsed, state_rate, mean_batch, state_rate / forward))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", default=",".join(domain_names()), help="comma-separated domain names")
    parser.add_argument("--budget", type=int, default=1000, help="expansion budget per search")
    parser.add_argument("--seed", type=int, default=2000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"flat PHS*(pi), cpu preset, budget {args.budget}; target efficiency >= {EFFICIENCY_TARGET} in lockstep")
    print(f"{'domain':<12} {'mode':<12} {'exp/s':>9} {'states/s':>9} {'batch':>6} {'efficiency':>10}")
    for name in args.domains.split(","):
        for mode, expansions, states, batch, efficiency in measure(name, args.budget, args.seed):
            print(f"{name:<12} {mode:<12} {expansions:>9,.0f} {states:>9,.0f} {batch:>6.1f} {efficiency:>10.2f}")


if __name__ == "__main__":
    main()
