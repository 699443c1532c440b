"""Does the VQ-VAE codebook stay in use? Two measurements (docs/subgoals.md).

``pairs``: train the `cpu`-size VQ-VAE alone on (state, later state) pairs from random
walks in generated levels, once per codebook behaviour, and print how the pairs spread
over the K codes afterwards::

    python benchmarks/codebook.py pairs [--domains tsp:hard,craftworld,boxworld] [--steps 300]

``runs``: summarise `sgps train` run directories of phs-sg / levin-sg (code use over the
run, training expansions until every training problem was solved, outstanding problems
at a common expansion count, pair distances)::

    python benchmarks/codebook.py runs RUN [RUN ...]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

from sgps.domains import get_domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.models.vqvae import CODEBOOKS, VQVAE
from sgps.runs.rundir import RunDirectory
from sgps.training.config import resolve_config
from sgps.training.methods.subgoal.learner import REPORT_COLUMNS


def walk_pairs(name: str, variant: str, levels: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Observations of 20 (state, state 1-8 steps later) pairs from a 40-step random walk per level."""
    domain = get_domain(name)
    rng = np.random.default_rng(seed)
    states, targets = [], []
    for level in generate_levels(domain, resolve_params(domain, variant), seed, levels):
        walk = [level]
        for _ in range(40):
            walk.append(domain.step(walk[-1], int(rng.integers(domain.num_actions))))
        for _ in range(20):
            i = int(rng.integers(len(walk) - 1))
            j = min(len(walk) - 1, i + 1 + int(rng.integers(8)))
            states.append(walk[i])
            targets.append(walk[j])
    return torch.from_numpy(domain.observe(states)), torch.from_numpy(domain.observe(targets))


def code_use(states: torch.Tensor, targets: torch.Tensor, codebook: str, steps: int, seed: int) -> list[int]:
    """Train a `cpu`-size VQ-VAE (K = 4, D = 32) for `steps` minibatches of 64; pairs per code afterwards."""
    torch.manual_seed(seed)
    vqvae = VQVAE(tuple(states.shape[1:]), 4, 32, 32, 2, codebook=codebook)
    optimizer = torch.optim.Adam(vqvae.parameters(), lr=1e-3, weight_decay=1e-4)
    generator = torch.Generator().manual_seed(seed)
    vqvae.train()
    for _ in range(steps):
        rows = torch.randint(len(states), (64,), generator=generator)
        optimizer.zero_grad()
        vqvae.loss(states[rows], targets[rows]).backward()
        optimizer.step()
    vqvae.eval()
    return vqvae.codebook.usage(vqvae.code(states, targets)).tolist()


def perplexity(counts: list[int]) -> float:
    shares = [c / sum(counts) for c in counts if c]
    return math.exp(-sum(p * math.log(p) for p in shares))


def measure_pairs(domains: list[str], steps: int, seed: int) -> None:
    print("| domain | codebook | pairs per code | codes used | perplexity |")
    print("| --- | --- | --- | ---: | ---: |")
    for entry in domains:
        name, _, variant = entry.partition(":")
        states, targets = walk_pairs(name, variant or "standard", 30, seed)
        for codebook in CODEBOOKS:
            counts = code_use(states, targets, codebook, steps, seed)
            used = sum(1 for c in counts if c)
            print(f"| {entry} | {codebook} | {counts} | {used} | {perplexity(counts):.2f} |")


def summarise_runs(runs: list[Path]) -> None:
    rows = []
    for run in runs:
        directory = RunDirectory(run, REPORT_COLUMNS)
        config = resolve_config("paper", run / "config.toml")
        outstanding = directory.read("outstanding")
        learning = directory.read("learning")
        solved_at = next((int(r["cumulative_expansions"]) for r in outstanding if r["outstanding"] == "0"), None)
        used = [int(r["codes_used"]) for r in learning if r.get("codes_used")]
        plex = [float(r["code_perplexity"]) for r in learning if r.get("code_perplexity")]
        distance = [float(r["failed_mean_length"]) for r in learning if r.get("failed_mean_length")]
        rows.append((run, config, outstanding, solved_at, used, plex, distance))
    common = min(int(rows_[2][-1]["cumulative_expansions"]) for rows_ in rows)
    print(f"outstanding at {common:,} expansions: the largest count every run reached")
    print("| run | codebook | hierarchy | seed | expansions until all solved | outstanding at the common count |"
          " final outstanding | codes used (mean) | perplexity (mean) | pair distance (mean) | seconds |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for run, config, outstanding, solved_at, used, plex, distance in rows:
        at_common = [r for r in outstanding if int(r["cumulative_expansions"]) <= common][-1]["outstanding"]
        print(
            f"| {run.name} | {config.subgoal.codebook} | {config.subgoal.hierarchy} | {config.bootstrap.seed} | "
            f"{'—' if solved_at is None else f'{solved_at:,}'} | {at_common} | {outstanding[-1]['outstanding']} | "
            f"{_mean(used)} | {_mean(plex)} | {_mean(distance)} | {float(outstanding[-1]['seconds']):.0f} |"
        )


def _mean(values: list[float]) -> str:
    return f"{statistics.fmean(values):.2f}" if values else "—"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    pairs = commands.add_parser("pairs", help="code use of a VQ-VAE trained alone on random-walk pairs")
    pairs.add_argument("--domains", default="tsp:hard,craftworld,boxworld", help="DOMAIN[:VARIANT],...")
    pairs.add_argument("--steps", type=int, default=300)
    pairs.add_argument("--seed", type=int, default=0)
    runs = commands.add_parser("runs", help="summarise phs-sg / levin-sg run directories")
    runs.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.command == "pairs":
        measure_pairs(args.domains.split(","), args.steps, args.seed)
    else:
        summarise_runs(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
