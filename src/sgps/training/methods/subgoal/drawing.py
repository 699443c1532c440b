"""Failed trees drawn from where they were searched (``subgoal.tree_rng = "per-search"``).

With the reference's single stream (``"batch"``) the training process clusters every
failed tree of a batch, one after the other, with one random stream, after the whole
batch has been searched: the graphs travel from the search processes, and the clustering
waits for the slowest search. With ``"per-search"`` each search of a batch has its own
stream, seeded by the run's seed, the pass, the batch and the search's place in the batch,
so its draw (`samples.draw_from_tree`) depends on nothing else and can be made in the
process that searched it, as soon as its share is searched. Only the drawn paths travel
back. The results of a run are the same whether it searches in this process or in a pool;
they differ from ``"batch"`` runs only by the random draws.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from sgps.search.engine import SearchResult
from sgps.training.methods.subgoal.samples import SamplingSettings, TreeDraw, draw_from_tree, failed_statuses

TREE_RNGS = ("batch", "per-search")
#: Mixed into every per-search seed: the streams of the method's other draws use other tags.
TREE_STREAM = 0x7E


def search_seeds(seed: int, iteration: int, batch: int, count: int) -> tuple[int, ...]:
    """One 64-bit seed for each of the `count` searches of batch `batch` of pass `iteration`."""
    return tuple(
        int(np.random.SeedSequence([seed, TREE_STREAM, iteration, batch, place]).generate_state(1, np.uint64)[0])
        for place in range(count)
    )


@dataclass(frozen=True)
class TreeDrawer:
    """A `sgps.training.bootstrap.ResultDrawer`: each failed search's graph replaced by its `TreeDraw`,
    and every other graph left out (the method learns nothing from them)."""

    settings: SamplingSettings
    seeds: tuple[int, ...]  # of the searches this drawer covers, in order

    def part(self, start: int, step: int) -> TreeDrawer:
        return TreeDrawer(self.settings, self.seeds[start::step])

    def __call__(self, results: list[SearchResult]) -> list[SearchResult]:
        if len(results) != len(self.seeds):
            raise ValueError(f"a drawer of {len(self.seeds)} searches was given {len(results)} results")
        failed = failed_statuses(self.settings)
        drawn = []
        for result, seed in zip(results, self.seeds, strict=True):
            draw = self._draw(result, seed) if result.status in failed else None
            drawn.append(dataclasses.replace(result, graph=None, draw=draw))
        return drawn

    def _draw(self, result: SearchResult, seed: int) -> TreeDraw | None:
        if result.graph is None:
            return None
        return draw_from_tree(result.graph, result.expanded, self.settings, np.random.default_rng(seed))
