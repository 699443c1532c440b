"""Budget schedules of the Bootstrap loop (spec/algorithms.md 6.4).

After each training pass a schedule maps the current budgets and what the pass
achieved to the next budgets. Under every schedule the validation budget follows
the training budget (the reference never updates it under DOUBLE).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Budgets:
    """Expansion budgets of training and validation searches."""

    train: int
    validation: int


@dataclass(frozen=True)
class PassOutcome:
    """What one full pass over the training problems achieved."""

    num_problems: int  # N: training problems
    unique_before: int  # U_prev: distinct problems solved before the pass
    unique_after: int  # U_new: distinct problems solved after the pass
    successes: int  # S_t: successful searches in the pass, re-solves included
    success_expansions: int  # T_t: total expansions of those successful searches
    previous_successes: int | None = None  # S_{t-1}; None before the second pass


Schedule = Callable[[Budgets, PassOutcome, int], Budgets]


def double(budgets: Budgets, outcome: PassOutcome, initial: int) -> Budgets:
    """DOUBLE: B <- 2B when the pass solved no new problem and some remain unsolved."""
    stalled = outcome.unique_after == outcome.unique_before and outcome.unique_after < outcome.num_problems
    train = 2 * budgets.train if stalled else budgets.train
    return Budgets(train, train)


def lts_cm(budgets: Budgets, outcome: PassOutcome, initial: int, b: float = 0.1) -> Budgets:
    """LTS-CM as the authors implemented it (the default).

    Halve (not below B_0) when the pass solved more than b·N new problems and more
    than (1 + b) U_prev searches succeeded; otherwise, if problems were outstanding,
    B <- 2B + floor(T_t / (N - U_new)). A pass that leaves nothing unsolved keeps B
    (the reference divides by zero there).
    """
    n = outcome.num_problems
    if outcome.unique_after - outcome.unique_before > b * n and outcome.successes > (1 + b) * outcome.unique_before:
        train = max(initial, budgets.train // 2)
    elif outcome.unique_before < n and outcome.unique_after < n:
        train = 2 * budgets.train + outcome.success_expansions // (n - outcome.unique_after)
    else:
        train = budgets.train
    return Budgets(train, train)


def lts_cm_paper(budgets: Budgets, outcome: PassOutcome, initial: int, b: float = 0.1) -> Budgets:
    """LTS-CM as the paper's appendix writes it.

    Halve (not below B_0) when more than (1 + b) times as many problems were solved
    as in the previous pass; otherwise B <- 2B + T_t / s_t, s_t = problems unsolved.
    Before the first pass the previous count is 0, so a first pass that solved
    anything halves (i.e. stays at B_0).
    """
    previous = outcome.previous_successes or 0
    unsolved = outcome.num_problems - outcome.unique_after
    if outcome.successes > (1 + b) * previous:
        train = max(initial, budgets.train // 2)
    elif unsolved > 0:
        train = 2 * budgets.train + outcome.success_expansions // unsolved
    else:
        train = budgets.train
    return Budgets(train, train)


SCHEDULES: dict[str, Schedule] = {"double": double, "lts-cm": lts_cm, "lts-cm-paper": lts_cm_paper}


def get_schedule(name: str) -> Schedule:
    """The budget schedule called `name` (double, lts-cm, lts-cm-paper)."""
    try:
        return SCHEDULES[name]
    except KeyError:
        raise ValueError(f"unknown budget schedule {name!r}; choose from {', '.join(SCHEDULES)}") from None
