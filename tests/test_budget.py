"""Budget schedules against the spec's formulas on hand-made pass sequences."""

from __future__ import annotations

import pytest

from sgps.training import Budgets, PassOutcome, double, get_schedule, lts_cm, lts_cm_paper

B0 = 4000


def test_double_only_when_nothing_new_was_solved():
    start = Budgets(B0, B0)
    stalled = PassOutcome(100, unique_before=40, unique_after=40, successes=38, success_expansions=9000)
    progress = PassOutcome(100, unique_before=40, unique_after=41, successes=41, success_expansions=9000)
    finished = PassOutcome(100, unique_before=100, unique_after=100, successes=100, success_expansions=9000)
    assert double(start, stalled, B0) == Budgets(8000, 8000)
    assert double(Budgets(8000, B0), progress, B0) == Budgets(8000, 8000)  # validation follows (Q14 fixed)
    assert double(start, finished, B0) == start


def test_lts_cm_sequence():
    """A hand-made run: a big jump halves, slow passes grow by 2B + T/unsolved, a full solve keeps B."""
    budget = Budgets(B0, B0)
    passes = [
        # N, U_prev, U_new, S_t, T_t -> expected budget
        (PassOutcome(1000, 0, 50, 50, 60_000), 2 * 4000 + 60_000 // 950),  # 50 new <= 0.1 N: grow
        (PassOutcome(1000, 50, 300, 320, 500_000), (2 * 4000 + 63) // 2),  # 250 new > 100 and 320 > 55: halve
        (PassOutcome(1000, 300, 330, 340, 700_000), 2 * 4031 + 700_000 // 670),
        (PassOutcome(1000, 330, 1000, 1000, 900_000), (2 * 4031 + 1044) // 2),
        (PassOutcome(1000, 1000, 1000, 1000, 900_000), (2 * 4031 + 1044) // 2),  # nothing outstanding: keep
    ]
    for outcome, expected in passes:
        budget = lts_cm(budget, outcome, B0)
        assert budget == Budgets(expected, expected)


def test_lts_cm_halving_never_goes_below_the_initial_budget():
    jump = PassOutcome(100, 0, 90, 90, 1000)
    assert lts_cm(Budgets(5000, 5000), jump, B0) == Budgets(B0, B0)


def test_lts_cm_needs_both_conditions_to_halve():
    # Many new problems but few successes relative to U_prev (S_t <= 1.1 U_prev): grow instead.
    outcome = PassOutcome(1000, 800, 910, 880, 100_000)
    assert lts_cm(Budgets(B0, B0), outcome, B0) == Budgets(8000 + 100_000 // 90, 8000 + 100_000 // 90)


def test_lts_cm_paper_form_first_pass_compares_with_a_previous_count_of_zero():
    # Anything solved in the first pass is more than (1 + b) x 0: halve, not below B_0.
    first = PassOutcome(100, 0, 10, 10, 5000)
    assert lts_cm_paper(Budgets(B0, B0), first, B0) == Budgets(B0, B0)
    assert lts_cm_paper(Budgets(3 * B0, 3 * B0), first, B0) == Budgets(6000, 6000)
    # Nothing solved: 0 > 0 is false, so B <- 2B + T/s with T = 0.
    nothing = PassOutcome(100, 0, 0, 0, 0)
    assert lts_cm_paper(Budgets(B0, B0), nothing, B0) == Budgets(8000, 8000)


def test_lts_cm_paper_form():
    better = PassOutcome(100, 10, 30, 30, 9000, previous_successes=10)
    assert lts_cm_paper(Budgets(9000, 9000), better, B0) == Budgets(4500, 4500)
    same = PassOutcome(100, 30, 31, 11, 9000, previous_successes=10)
    assert lts_cm_paper(Budgets(9000, 9000), same, B0) == Budgets(18000 + 9000 // 69, 18000 + 9000 // 69)


def test_schedules_by_name():
    assert get_schedule("lts-cm") is lts_cm and get_schedule("double") is double
    with pytest.raises(ValueError, match="unknown budget schedule 'triple'"):
        get_schedule("triple")
