"""The solution memory (`bootstrap.solution_memory`, not the paper's): the latest solutions learnt again.

The reference loop builds each update from its batch's searches alone (spec/algorithms.md
6.2, step 4; quirk Q20: a replay buffer is allocated and never used). Where most searches
fail, that makes a solution count once: the networks that learn from solutions only
(π_hi, π_unc and h for π^SG; the whole network for the flat methods) take one update from
it, and the next batches, which solve nothing, leave them where they are until the problem
comes round again, a pass later. With a memory of M, every update also learns from the
solutions of the M problems solved most recently in earlier batches, as if they had been
solved again in this batch (same path, same expansions, so the same Levin weight). With
the default M = 0 the loop is the reference's.

What is kept is small and exact: per problem, its index among the training problems, the
solution's actions, the expansions of the search that found it and ln π of its path. The
states are replayed from the level when an update needs them, so the memory travels in
trainer.pt (a resume goes on with it, bit for bit) without holding observations. A problem
solved again replaces its entry with the new solution; the oldest entries leave first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sgps.domains.base import Domain
from sgps.search.engine import SearchResult

#: One remembered solution: [problem index, actions, expansions, ln π of the path or None]
#: (lists and numbers only, as trainer.pt stores them).
Entry = list[Any]


def remember(
    memory: Sequence[Entry], ids: Sequence[int], results: Sequence[SearchResult], capacity: int
) -> list[Entry]:
    """`memory` after a batch of searches of the training problems `ids` with `results`: their solutions
    added (replacing earlier ones of the same problems), then the oldest dropped to keep `capacity`."""
    if capacity == 0:
        return []
    solved = {problem: [problem, list(result.actions), int(result.expanded), result.solution_log_prob]
              for problem, result in zip(ids, results, strict=True) if result.solved and result.actions}  # fmt: skip
    kept = [list(entry) for entry in memory if entry[0] not in solved]
    return [*kept, *solved.values()][-capacity:]


def check_memory(memory: Any, domain: Domain[Any], problems: Sequence[Any]) -> None:
    """ValueError naming the first entry of a memory read from trainer.pt that is not [the index of one of
    the training `problems`, a non-empty list of the domain's actions, expansions >= 0, ln π or None]
    whose actions, replayed from that problem, reach its goal (`recall` replays them)."""
    if not isinstance(memory, list):
        raise ValueError("its solution memory is not a list")
    actions = domain.num_actions
    for position, entry in enumerate(memory):
        fits = (isinstance(entry, list) and len(entry) == 4 and type(entry[0]) is int
                and 0 <= entry[0] < len(problems) and isinstance(entry[1], list) and entry[1]
                and all(type(a) is int and 0 <= a < actions for a in entry[1])
                and type(entry[2]) is int and entry[2] >= 0
                and (entry[3] is None or isinstance(entry[3], float)))  # fmt: skip
        if not fits:
            raise ValueError(f"entry {position} of its solution memory is not a solution of one of its problems")
    recall(domain, problems, memory, exclude=set())


def recall(
    domain: Domain[Any], problems: Sequence[Any], memory: Sequence[Entry], exclude: set[int]
) -> list[SearchResult]:
    """The remembered solutions of the problems not in `exclude` (those the batch solved itself), as
    solved search results, their states replayed from `problems` (the training levels).

    A solution that no longer reaches its goal (the level file or the domain's rules changed
    since it was found) raises ValueError naming the problem."""
    recalled = []
    for problem, actions, expanded, log_prob in memory:
        if problem in exclude:
            continue
        states = [problems[problem]]
        for action in actions:
            states.append(domain.step(states[-1], action))
        if not domain.is_goal(states[-1]):
            raise ValueError(f"the remembered solution of training problem {problem} no longer reaches its goal")
        result = SearchResult(status="solved", states=tuple(states), actions=tuple(actions), expanded=expanded,
                              generated=0, seconds=0.0, solution_log_prob=log_prob)  # fmt: skip
        recalled.append(result)
    return recalled
