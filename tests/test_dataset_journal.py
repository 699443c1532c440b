"""The dataset journal (`sgps dataset`'s record of finished levels) trusts only what its builder wrote.

The fears: a line of nested brackets or a huge line crashes or swamps the reader; an
edit that still replays (a made-up "no solution exists", a detour before an optimal
solution, a second entry of a level with another value, a changed checksum) puts a
wrong trajectory in the dataset or drops a level. Each such line must be dropped and its
level solved again, so that the dataset equals an undamaged build's, byte for byte.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sgps.domains import get_domain
from sgps.domains.generation import generate_levels
from sgps.domains.levels import Level, read_levels, write_levels
from sgps.errors import ConfigError
from sgps.training.methods.hips import dataset as dataset_module
from sgps.training.methods.hips.dataset import NO_SOLUTION, BuildReport, build_dataset, write_dataset

SMALL_TSP = {"size": 6, "cities": 2, "walls": True}
#: A state cap every level below solves under (the largest stores about 50 states), small enough
#: that the journal's line bound is about a kilobyte.
SMALL_CAP = 200


@dataclass
class Build:
    """A finished, journalled build of four small TSP levels: what a damaged journal must rebuild."""

    tmp: Path
    domain: Any
    levels: list[Level]
    max_states: int | None
    journal: Path
    lines: list[str]  # the undamaged journal's lines
    clean: bytes  # the undamaged build's dataset file

    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines[1:]]

    def line_of(self, index: int) -> int:
        """The 0-based line of the journal that records level `index`."""
        return next(n for n, entry in enumerate(self.entries(), start=1) if entry["index"] == index)

    def write(self, lines: list[str]) -> None:
        self.journal.write_text("\n".join(lines) + "\n")

    def rebuild(self, monkeypatch: pytest.MonkeyPatch) -> tuple[BuildReport, list[int]]:
        """Build again from the journal: the report, and the levels solved again (indices, in order)."""
        solved: list[int] = []
        solve_level = dataset_module.solve_level
        keys = [self.domain.key(level.state) for level in self.levels]

        def counted(domain: Any, state: Any, max_states: int | None) -> dict[str, Any]:
            solved.append(keys.index(domain.key(state)))
            return solve_level(domain, state, max_states)

        monkeypatch.setattr(dataset_module, "solve_level", counted)
        report = build_dataset(self.domain, self.levels, max_states=self.max_states, journal=self.journal)
        monkeypatch.setattr(dataset_module, "solve_level", solve_level)
        return report, solved

    def assert_clean(self, report: BuildReport) -> None:
        """The rebuilt dataset is the undamaged build's, byte for byte, and no level is skipped."""
        out = self.tmp / "rebuilt.npz"
        write_dataset(out, report.dataset)
        assert out.read_bytes() == self.clean
        assert report.skipped == ()


def make_build(tmp_path: Path, max_states: int | None = None) -> Build:
    tsp = get_domain("tsp")
    path = tmp_path / "train.txt"
    write_levels(path, tsp, generate_levels(tsp, SMALL_TSP, 0, 4), variant="standard", seed=0, params=SMALL_TSP)
    levels = read_levels(path).levels
    journal = tmp_path / "data.npz.journal"
    built = build_dataset(tsp, levels, max_states=max_states, journal=journal)
    clean = tmp_path / "clean.npz"
    write_dataset(clean, built.dataset)
    assert not built.skipped and len(built.dataset.trajectories) == 4
    return Build(tmp_path, tsp, levels, max_states, journal, journal.read_text().splitlines(), clean.read_bytes())


@pytest.fixture
def build(tmp_path: Path) -> Build:
    return make_build(tmp_path)


def no_op(domain: Any, level: Level) -> int:
    """An action that leaves the level's start as it is (a move into a wall or off the grid)."""
    start = domain.key(level.state)
    return next(a for a in range(domain.num_actions) if domain.key(domain.step(level.state, a)) == start)


def with_entry(build: Build, index: int, change: Callable[[dict[str, Any]], dict[str, Any]]) -> list[str]:
    """The journal's lines with level `index`'s entry changed (written as json.dumps writes it)."""
    lines = list(build.lines)
    number = build.line_of(index)
    lines[number] = json.dumps(change(json.loads(lines[number])))
    return lines


# -- lines that are no entry: dropped, never parsed deeply or read whole -------------------


def test_a_line_of_nested_brackets_is_dropped_not_a_recursion_error(build, monkeypatch):
    build.write([*build.lines, "[" * 100_000, '{"index":' * 50_000])
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)
    assert solved == []  # the lines recorded no level: every level's entry stands
    assert [line.split(": ")[0] for line in report.dropped] == [f"{build.journal}:6", f"{build.journal}:7"]
    assert all("nested deeper than an entry" in line and "solved again" in line for line in report.dropped)


def test_a_key_given_twice_in_a_line_is_dropped_not_resolved_to_its_last_value(build, monkeypatch):
    number = build.line_of(1)
    lines = list(build.lines)
    lines[number] = '{"index":2,' + lines[number][1:]  # json.loads would keep the last: 1
    build.write(lines)
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)
    assert solved == [1]
    assert report.dropped == (f"{build.journal}:{number + 1}: not a journal entry (the key 'index' twice); "
                              "dropped, its level is solved again",)  # fmt: skip


def test_a_line_longer_than_any_entry_of_the_build_is_dropped_unread(tmp_path, monkeypatch):
    build = make_build(tmp_path, max_states=SMALL_CAP)
    # A "solution" of 10 times the cap's length: a detour no exact solver with this cap writes.
    detour = [no_op(build.domain, build.levels[2])] * (10 * SMALL_CAP)
    lines = with_entry(build, 2, lambda e: {**e, "actions": detour + e["actions"]})
    build.write(lines)
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)
    assert solved == [2]
    (dropped,) = report.dropped
    assert dropped.startswith(f"{build.journal}:{build.line_of(2) + 1}: longer than any entry of this build (over ")
    bound = dataset_module._line_bound(json.loads(build.lines[0]), build.domain, build.levels, SMALL_CAP)
    assert bound < 2_000  # derived from the cap: about 3 bytes per action, `SMALL_CAP` + 4 actions at most
    # ... and a line as long as the longest solution the cap allows (re-spaced by a JSON tool) is within it.
    longest = {"index": 3, "actions": [3] * (SMALL_CAP + build.domain.num_actions), "checksum": "0" * 64}
    assert len(json.dumps(longest)) <= bound


def test_a_cut_over_long_last_line_is_removed_like_any_cut_line(tmp_path, monkeypatch):
    build = make_build(tmp_path, max_states=SMALL_CAP)
    build.journal.write_text("\n".join(build.lines[:3]) + "\n" + '{"index":3,"actions":[' + "0," * 5_000)
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)
    assert solved == [index for index in range(4) if index not in (build.entries()[0]["index"],
                                                                   build.entries()[1]["index"])]  # fmt: skip
    assert report.dropped == ()
    assert build.journal.read_text().splitlines()[:3] == build.lines[:3]


class CountingReader(io.BytesIO):
    """A binary file that remembers the most bytes one read handed out."""

    most = 0

    def readline(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        line = super().readline(size)
        self.most = max(self.most, len(line))
        return line


def test_a_huge_line_is_skipped_in_chunks_never_held_whole():
    reader = CountingReader(b'{"a":1}\n' + b"x" * 3_000_000 + b'\n{"b":2}\n' + b"y" * 2_000)
    lines = list(dataset_module._journal_lines(reader, 1_000))
    assert [(content, complete) for _, content, complete in lines] == [
        (b'{"a":1}', True), (None, True), (b'{"b":2}', True), (None, False)]  # fmt: skip
    assert lines[-1][0] == 3_000_017  # where a cut last line starts: the journal is truncated there
    assert reader.most <= max(1_001, dataset_module._SKIP_CHUNK)


# -- edits that replay: caught by the entry's checksum, the level solved again -------------


def test_a_made_up_no_solution_on_a_solvable_level_is_solved_again(build, monkeypatch):
    def made_up(entry: dict[str, Any]) -> dict[str, Any]:  # the builder's checksum kept
        return {"index": entry["index"], "skipped": NO_SOLUTION, **{k: v for k, v in entry.items() if k == "checksum"}}

    build.write(with_entry(build, 1, made_up))
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)  # level 1 is not skipped
    assert solved == [1]
    assert report.dropped == (f"{build.journal}:{build.line_of(1) + 1}: level 1 (train:1): its checksum does not "
                              "match its content (an edited entry, or another build's); dropped, its level is solved "
                              "again",)  # fmt: skip


def test_a_no_op_move_before_an_optimal_solution_is_solved_again(build, monkeypatch):
    move = no_op(build.domain, build.levels[2])
    build.write(with_entry(build, 2, lambda e: {**e, "actions": [move, *e["actions"]]}))  # still reaches the goal
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)  # the optimal trajectory, not the detour
    assert solved == [2]
    assert len(report.dropped) == 1 and "level 2 (train:2): its checksum does not match" in report.dropped[0]


@pytest.mark.parametrize("first", [False, True], ids=["the copy after", "the copy before"])
def test_a_second_entry_of_a_level_with_another_value_is_dropped(build, monkeypatch, first):
    number = build.line_of(1)
    copy = json.loads(build.lines[number])
    copy["actions"] = [no_op(build.domain, build.levels[1]), *copy["actions"]]
    lines = [*build.lines, json.dumps(copy)] if not first else [build.lines[0], json.dumps(copy), *build.lines[1:]]
    build.write(lines)
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)
    assert solved == []  # the builder's own entry of level 1 stands, whichever comes first
    assert len(report.dropped) == 1 and f"{build.journal}:{6 if not first else 2}: level 1 " in report.dropped[0]


def test_an_edited_checksum_drops_its_entry(build, monkeypatch):
    def flipped(entry: dict[str, Any]) -> dict[str, Any]:
        checksum = entry["checksum"]
        return {**entry, "checksum": ("1" if checksum[0] == "0" else "0") + checksum[1:]}

    build.write(with_entry(build, 3, flipped))
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)
    assert solved == [3]
    assert len(report.dropped) == 1 and "level 3 (train:3): its checksum does not match" in report.dropped[0]
    # The level's new entry is appended after the dropped line: a resume from here drops that line again
    # and trusts the new entry, solving nothing.
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)
    assert solved == [] and len(report.dropped) == 1


def test_an_entry_copied_from_another_build_does_not_match_this_build(build, monkeypatch):
    other = build.tmp / "other"
    other.mkdir()
    copied = make_build(other, max_states=SMALL_CAP)  # the same levels, another --max-states: another identity
    lines = list(build.lines)
    lines[build.line_of(0)] = copied.lines[copied.line_of(0)]  # the same solution, sealed for the other build
    build.write(lines)
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)
    assert solved == [0]
    assert len(report.dropped) == 1 and "level 0 (train:0): its checksum does not match" in report.dropped[0]


def test_a_journal_rewritten_by_a_json_tool_still_counts_every_entry(build, monkeypatch):
    build.write([build.lines[0], *(json.dumps(dict(reversed(entry.items())), indent=None)
                                   for entry in build.entries())])  # fmt: skip
    report, solved = build.rebuild(monkeypatch)
    build.assert_clean(report)
    assert solved == [] and report.dropped == ()


def test_a_journal_of_the_format_before_checksums_is_refused_with_what_to_do(build):
    header = json.loads(build.lines[0])
    assert header["format"] == dataset_module.JOURNAL_FORMAT == "sgps-hips-dataset-journal-2"
    old = [json.dumps({**header, "format": "sgps-hips-dataset-journal-1"})]
    old += [json.dumps({key: value for key, value in entry.items() if key != "checksum"}) for entry in build.entries()]
    build.write(old)
    with pytest.raises(ConfigError, match=r"data\.npz\.journal: a dataset journal of another sgps version \(format "
                                          r"'sgps-hips-dataset-journal-1'.*delete it to start over"):  # fmt: skip
        build_dataset(build.domain, build.levels, journal=build.journal)


def test_solver_processes_that_keep_stopping_are_one_error_naming_what_to_do(monkeypatch):
    """After `POOL_RESTARTS` fresh pools broke too, the build stops with one `SgpsError`, not a traceback."""
    from concurrent.futures.process import BrokenProcessPool
    from types import SimpleNamespace

    from sgps.errors import SgpsError
    from sgps.training.methods.hips import dataset

    starts = []

    def broken(domain, levels, todo, max_states, workers):
        starts.append(list(todo))
        yield todo[0], {"skipped": dataset.NO_SOLUTION}
        raise BrokenProcessPool("a process in the pool was terminated abruptly")

    monkeypatch.setattr(dataset, "_solve_in_pool", broken)
    tsp = get_domain("tsp")
    levels = [SimpleNamespace(state=tsp.generate(seed)) for seed in range(5)]
    solved = []
    with pytest.raises(SgpsError, match=r"stopped unexpectedly .* 3 times, with 2 levels left to solve; run the same"):
        for index, _ in dataset._solve_all(tsp, levels, range(5), None, 2):
            solved.append(index)
    assert starts == [[0, 1, 2, 3, 4], [1, 2, 3, 4], [2, 3, 4]] and solved == [0, 1, 2]
