"""The cost of one learning step (the model update after a batch of 32 searches), per memory layout.

For each domain this searches 32 levels of a variant with an untrained method of the `cpu`
preset (lockstep, recording the search graphs), then times the method's update on those
results (`Method.learn`: for π^SG the VQ-VAE, the cluster hierarchies, the sampled pairs
and the three networks), from the same starting weights, in each memory layout of the
convolution trunks (`sgps.models.resnet.set_channels_last`), the layouts interleaved,
`--repeats` times; it prints the fastest time of each layout and the ratio. One thread.
Before any problem is solved (the usual case at a small budget) π^SG learns from failed
trees only. Usage::

    python benchmarks/learning_step.py [--domains tsp:hard,boulderdash:hard] [--algorithm phs-sg]
                                       [--budget 400] [--repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from sgps.domains import get_domain
from sgps.domains.generation import resolve_params
from sgps.models.resnet import set_channels_last
from sgps.search import search_lockstep
from sgps.training.config import resolve_config
from sgps.training.setup import build_method

LAYOUTS = {"nchw": False, "channels-last": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", default="tsp:hard,boulderdash:hard,craftworld:hard", help="DOMAIN:VARIANT,...")
    parser.add_argument("--algorithm", default="phs-sg")
    parser.add_argument("--budget", type=int, default=400, help="expansion budget of the 32 searches")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{args.algorithm}, cpu preset, 32 searches at budget {args.budget}; fastest of {args.repeats}")
    print(f"{'domain':<24} {'solved':>6} {'nchw s':>8} {'channels-last s':>16} {'speed-up':>9}")
    for item in args.domains.split(","):
        name, _, variant = item.partition(":")
        domain = get_domain(name)
        params = resolve_params(domain, variant or "standard")
        levels = [domain.generate(seed, **params) for seed in range(32)]
        config = resolve_config("cpu", overrides={"run": {"algorithm": args.algorithm}})
        method = build_method(domain, levels[0], config)
        results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=args.budget,
                                  record_graph=True)  # fmt: skip
        start = copy.deepcopy(method.state_dict())
        seconds: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
        previous = set_channels_last(False)
        try:
            for _ in range(args.repeats):
                for layout, enabled in LAYOUTS.items():
                    set_channels_last(enabled)
                    method.load_state_dict(copy.deepcopy(start))
                    began = time.perf_counter()
                    method.learn(domain, results)
                    seconds[layout].append(time.perf_counter() - began)
        finally:
            set_channels_last(previous)
        nchw, last = min(seconds["nchw"]), min(seconds["channels-last"])
        solved = sum(result.solved for result in results)
        print(f"{item:<24} {solved:>6} {nchw:>8.2f} {last:>16.2f} {nchw / last:>8.2f}x")


if __name__ == "__main__":
    main()
