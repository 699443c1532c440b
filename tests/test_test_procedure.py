"""The test procedure (budget doubling over rounds): its record, and its journal of attempts.

The fear: a test interrupted after an hour either starts again from nothing, or resumes
into a record that differs from an uninterrupted one (an attempt lost, doubled, or
taken from another model's test).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from sgps.domains import get_domain
from sgps.domains.generation import generate_levels
from sgps.experiments.runstate import journalled_attempts
from sgps.runs.memory import concurrent_searches, searches_in_step
from sgps.runs.testing import TEST_COLUMNS, attempt_fault, attempt_identity, fault_in_test_record, run_test
from sgps.search import make_algorithm
from sgps.search.evaluators import DomainHeuristic

SMALL_TSP = {"size": 6, "cities": 2, "walls": True}
BUDGET, ROUNDS = 6, 3


class KilledError(Exception):
    """Stands for a kill in the middle of a test."""


class CountingHeuristic(DomainHeuristic):
    """The domain's heuristic, counting its calls and the states it evaluated (`evaluated`: the
    searches' work); raises `KilledError` at call `stop_at`."""

    def __init__(self, domain, stop_at: int | None = None) -> None:
        super().__init__(domain)
        self.calls, self.evaluated, self.stop_at = 0, 0, stop_at

    def __call__(self, states):
        self.calls += 1
        self.evaluated += len(states)
        self.largest = max(getattr(self, "largest", 0), len(states))
        if self.calls == self.stop_at:
            raise KilledError
        return super().__call__(states)


def identity_of(folder, budget: int = BUDGET) -> str:
    return attempt_identity(folder / "model.bin", folder / "levels.txt", budget=budget, rounds=ROUNDS, epsilon=0.01)


@pytest.fixture
def setting(tmp_path):
    tsp = get_domain("tsp")
    levels = generate_levels(tsp, SMALL_TSP, 12, 8)  # solved in rounds 1, 2 and 3, and five never
    for name in ("model.bin", "levels.txt"):
        (tmp_path / name).write_bytes(name.encode())
    return tsp, levels, identity_of(tmp_path)


def record(path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


def run(tsp, levels, csv_path, identity, heuristic, at_once=concurrent_searches, **options):
    return run_test(tsp, levels, make_algorithm("gbfs"), heuristic, budget=BUDGET, rounds=ROUNDS, csv_path=csv_path,
                    identity=identity, at_once=at_once, **options)  # fmt: skip


def test_an_interrupted_test_resumes_into_the_record_of_an_uninterrupted_one(tmp_path, setting):
    tsp, levels, identity = setting
    whole = run(tsp, levels, tmp_path / "whole.csv", identity, CountingHeuristic(tsp))
    rows = record(tmp_path / "whole.csv")
    assert fault_in_test_record(rows, len(levels), BUDGET, ROUNDS) is None
    assert {row["round"] for row in rows} == {"1", "2", "3"}  # the budget makes every round count
    full_cost = CountingHeuristic(tsp)
    run(tsp, levels, tmp_path / "again.csv", identity, full_cost)

    cut = tmp_path / "cut.csv"
    with pytest.raises(KilledError):
        run(tsp, levels, cut, identity, CountingHeuristic(tsp, stop_at=full_cost.calls * 2 // 3))
    journal = tmp_path / "cut.csv.partial"
    assert not cut.exists() and journal.is_file()  # the progress is in the run folder, the record is not
    journalled = journal.read_text().splitlines()
    assert journalled[0] == f"# {identity}" and journalled[1] == ",".join((*TEST_COLUMNS, "checksum"))
    assert len(journalled) > 4
    with open(journal, "a") as handle:  # a kill in the middle of writing a row
        handle.write("2,5,1,")
    rest = CountingHeuristic(tsp)
    resumed = run(tsp, levels, cut, identity, rest)
    assert record(cut) == rows and resumed == whole
    assert 0 < rest.evaluated < full_cost.evaluated  # only the attempts not journalled were searched again
    assert not journal.exists()


def test_a_round_searched_a_few_levels_at_a_time_records_what_one_lockstep_does(tmp_path, setting):
    # The fear: groups that write a result under another level's row, or leave levels out.
    tsp, levels, identity = setting
    together = CountingHeuristic(tsp)
    run(tsp, levels, tmp_path / "together.csv", identity, together)
    grouped = CountingHeuristic(tsp)
    run(tsp, levels, tmp_path / "grouped.csv", identity, grouped, at_once=lambda budget: 3)
    assert record(tmp_path / "grouped.csv") == record(tmp_path / "together.csv")
    actions = tsp.num_actions
    assert together.largest > 3 * actions >= grouped.largest  # at most 3 searches asked at once
    waiting = CountingHeuristic(tsp)  # groups of 3, each waiting for its longest search (`refill=False`)
    run(tsp, levels, tmp_path / "waiting.csv", identity, waiting, at_once=lambda budget: 3, refill=False)
    assert record(tmp_path / "waiting.csv") == record(tmp_path / "together.csv")
    assert 3 * actions >= waiting.largest and waiting.calls > grouped.calls  # the lockstep thinned out in groups

    cut = tmp_path / "cut.csv"  # interrupted in a group and resumed in groups of another size
    with pytest.raises(KilledError):
        run(tsp, levels, cut, identity, CountingHeuristic(tsp, stop_at=grouped.calls // 2), at_once=lambda budget: 3)
    run(tsp, levels, cut, identity, CountingHeuristic(tsp), at_once=lambda budget: 2)
    assert record(cut) == record(tmp_path / "together.csv")


def test_rounds_continued_in_one_search_a_level_record_what_rounds_searched_afresh_do(tmp_path, setting):
    # The fear: the cheaper default records another test than the paper's procedure (an attempt
    # that differs, a round missing or extra for a level solved on the way).
    tsp, levels, identity = setting
    told: list[tuple[str, int, int]] = []
    afresh, continued = CountingHeuristic(tsp), CountingHeuristic(tsp)
    summary = run(tsp, levels, tmp_path / "afresh.csv", identity, afresh, restart_rounds=True)
    assert run(tsp, levels, tmp_path / "continued.csv", identity, continued,
               progress=lambda stage, done, *, total: told.append((stage, done, total))) == summary  # fmt: skip
    rows = record(tmp_path / "continued.csv")
    assert rows == record(tmp_path / "afresh.csv")
    solved_in = [int(row["round"]) for row in rows if row["solved"] == "1"]
    assert {1, 2, 3} <= set(solved_in) and any(row["round"] == "3" and row["solved"] == "0" for row in rows)
    assert continued.evaluated < afresh.evaluated  # the earlier rounds' trees were not searched again
    assert told[0] == ("rounds 1-3 (budget 6 to 24, one search a problem)", 0, len(levels))
    assert told[-1][1:] == (len(levels), len(levels))


@pytest.mark.parametrize("cut_restarting", [True, False])
def test_a_test_interrupted_in_one_mode_resumes_in_the_other(tmp_path, setting, cut_restarting):
    tsp, levels, identity = setting
    run(tsp, levels, tmp_path / "whole.csv", identity, CountingHeuristic(tsp), restart_rounds=True)
    cost = CountingHeuristic(tsp)
    run(tsp, levels, tmp_path / "again.csv", identity, cost, restart_rounds=cut_restarting)
    cut = tmp_path / "cut.csv"
    with pytest.raises(KilledError):
        run(tsp, levels, cut, identity, CountingHeuristic(tsp, stop_at=cost.calls * 2 // 3),
            restart_rounds=cut_restarting, at_once=lambda budget: 2)  # fmt: skip
    journal = (tmp_path / "cut.csv.partial").read_text().splitlines()
    assert len(journal) > 3  # attempts were journalled
    if not cut_restarting:  # and a round journalled without the round before it is tried again
        first_rounds = [line for line in journal[2:] if line.startswith("1,")]
        journal.remove(first_rounds[0])
        (tmp_path / "cut.csv.partial").write_text("\n".join(journal) + "\n")
    rest, whole = CountingHeuristic(tsp), CountingHeuristic(tsp)
    run(tsp, levels, cut, identity, rest, restart_rounds=not cut_restarting)
    run(tsp, levels, tmp_path / "whole-again.csv", identity, whole, restart_rounds=not cut_restarting)
    assert record(cut) == record(tmp_path / "whole.csv")
    assert rest.evaluated < whole.evaluated  # the other mode's journalled attempts were kept


def test_searches_at_once_are_what_half_the_memory_holds():
    gib = 1 << 30
    assert concurrent_searches(512_000, 24 * gib) == 9  # the paper's cap on this 24 GiB machine
    assert concurrent_searches(4_000, 24 * gib) == 1258
    assert concurrent_searches(512_000, 1 * gib) == 1  # never fewer than one
    assert concurrent_searches(512_000, 0) == 1  # memory unknown
    assert concurrent_searches(1, 24 * gib) >= 100
    assert [searches_in_step(workers, 512_000, 24 * gib) for workers in (1, 2, 4, 9, 16)] == [9, 8, 8, 9, 9]


def test_only_searches_in_groups_over_processes_round_the_count_to_a_multiple_of_them(tmp_path, monkeypatch):
    """9 searches fit at 512,000 on 24 GiB: refilled, they run 9 at a time (5 + 4 over 2 processes);
    groups dealt to 2 or 4 processes run 8, so that no process idles while another finishes an extra one."""
    import sgps.runs.memory
    import sgps.runs.runner
    from sgps.cli import main
    from sgps.domains import write_levels

    tsp = get_domain("tsp")
    problems = tmp_path / "problems.txt"
    write_levels(problems, tsp, [tsp.generate(seed, size=6, cities=2) for seed in range(4)])
    run_dir = tmp_path / "run"
    assert main(["train", "--problems", str(problems), "--out", str(run_dir), "--preset", "tiny", "--quiet",
                 "--device", "cpu", "--max-batches", "1"]) == 0  # fmt: skip
    monkeypatch.setattr(sgps.runs.memory, "machine_memory", lambda: 24 << 30)
    seen = []

    def capture(*args, at_once, search_stream, **options):
        seen.append((at_once(512_000), search_stream is not None))

    monkeypatch.setattr(sgps.runs.runner, "run_test", capture)
    for workers, refill in ((1, True), (2, True), (2, False), (4, False)):
        sgps.runs.runner.test(run_dir, problems, checkpoint="last", workers=workers, refill=refill, record=False)
    assert seen == [(9, False), (9, True), (8, False), (8, False)]


def test_a_journal_of_another_model_or_budget_is_not_resumed(tmp_path, setting):
    tsp, levels, identity = setting
    cut = tmp_path / "cut.csv"
    with pytest.raises(KilledError):
        run(tsp, levels, cut, identity, CountingHeuristic(tsp, stop_at=15))
    (tmp_path / "model.bin").write_bytes(b"another model")
    other = identity_of(tmp_path)
    assert other != identity and other != identity_of(tmp_path, budget=BUDGET * 2)
    full_cost = CountingHeuristic(tsp)
    run(tsp, levels, tmp_path / "whole.csv", other, full_cost)
    fresh = CountingHeuristic(tsp)
    run(tsp, levels, cut, other, fresh)
    assert fresh.evaluated == full_cost.evaluated  # everything searched again
    assert record(cut) == record(tmp_path / "whole.csv")


def test_without_an_identity_nothing_is_journalled(tmp_path, setting):
    tsp, levels, _ = setting
    with pytest.raises(KilledError):
        run(tsp, levels, tmp_path / "cut.csv", None, CountingHeuristic(tsp, stop_at=15))
    assert list(tmp_path.glob("cut.csv*")) == []
    assert np.isfinite(run(tsp, levels, None, None, CountingHeuristic(tsp)).total_expansions)


def test_a_comparison_shows_how_many_attempts_an_unfinished_test_has_journalled(tmp_path, setting):
    tsp, levels, identity = setting
    (tmp_path / "run" / "metrics").mkdir(parents=True)
    assert journalled_attempts(tmp_path / "run", "test") == 0
    with pytest.raises(KilledError):
        run(tsp, levels, tmp_path / "run" / "metrics" / "test-test.csv", identity, CountingHeuristic(tsp, stop_at=15))
    rows = (tmp_path / "run" / "metrics" / "test-test.csv.partial").read_text().splitlines()[2:]
    assert journalled_attempts(tmp_path / "run", "test") == len(rows) > 0


def interrupted_journal(tmp_path, setting) -> tuple[list[dict[str, str]], Path, list[str]]:
    """The record of an uninterrupted test, and the journal (path, lines) of the same test killed two-thirds in."""
    tsp, levels, identity = setting
    run(tsp, levels, tmp_path / "whole.csv", identity, CountingHeuristic(tsp))
    full_cost = CountingHeuristic(tsp)
    run(tsp, levels, tmp_path / "again.csv", identity, full_cost)
    with pytest.raises(KilledError):
        run(tsp, levels, tmp_path / "cut.csv", identity, CountingHeuristic(tsp, stop_at=full_cost.calls * 2 // 3))
    journal = tmp_path / "cut.csv.partial"
    return record(tmp_path / "whole.csv"), journal, journal.read_text().splitlines()


def resumed_calls(tmp_path, setting, lines: list[str]) -> tuple[int, list[dict[str, str]]]:
    """Write `lines` as the journal, resume the test: the states it evaluated and the record it writes."""
    tsp, levels, identity = setting
    (tmp_path / "cut.csv.partial").write_text("\n".join(lines) + "\n")
    rest = CountingHeuristic(tsp)
    run(tsp, levels, tmp_path / "cut.csv", identity, rest)
    return rest.evaluated, record(tmp_path / "cut.csv")


def edited(line: str, column: str, value: str) -> str:
    fields = next(csv.reader([line]))
    fields[TEST_COLUMNS.index(column)] = value
    return ",".join(fields)


def test_an_edited_journal_row_is_searched_again_not_trusted(tmp_path, setting):
    whole, _, lines = interrupted_journal(tmp_path, setting)
    kept_calls, kept = resumed_calls(tmp_path, setting, lines)
    assert kept == whole
    first = lines[2]
    expanded = next(csv.reader([first]))[TEST_COLUMNS.index("expanded")]
    assert int(expanded) > 1  # so that generated = 1 cannot hold
    for column, value in (("generated", "1"), ("seconds", "0.0"), ("steps", str(10**30 - 1))):
        calls, rebuilt = resumed_calls(tmp_path, setting, [*lines[:2], edited(first, column, value), *lines[3:]])
        assert rebuilt == whole and calls > kept_calls, column  # its attempt was searched again


def test_an_attempt_journalled_twice_is_searched_again(tmp_path, setting):
    whole, _, lines = interrupted_journal(tmp_path, setting)
    kept_calls, _ = resumed_calls(tmp_path, setting, lines)
    calls, rebuilt = resumed_calls(tmp_path, setting, [*lines, lines[2]])
    assert rebuilt == whole and calls > kept_calls


def test_an_over_long_journal_line_is_dropped_without_a_traceback(tmp_path, setting):
    whole, _, lines = interrupted_journal(tmp_path, setting)
    huge = edited(lines[2], "actions", "1 " * 10_000_000)  # a 20 MB field
    calls, rebuilt = resumed_calls(tmp_path, setting, [*lines[:2], huge, *lines[3:]])
    assert rebuilt == whole and calls > 0


def test_a_row_that_expands_more_nodes_than_it_generated_is_no_attempt():
    row = {"solved": "0", "expanded": "136", "generated": "1", "length": "", "seconds": "0.1", "steps": "3"}
    assert "more than the 1 nodes generated" in attempt_fault(row, 4000)
    assert attempt_fault({**row, "generated": "136"}, 4000) is None
