"""`sgps compare`: bad configs refused key by key, finished runs never repeated, interrupted runs
resumed to the rows of an uninterrupted run, and no more threads than cores."""

from __future__ import annotations

import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load_file

from sgps.cli import main
from sgps.errors import ConfigError
from sgps.experiments.comparison import _refuse_changes
from sgps.experiments.concurrency import Concurrency, plan_concurrency
from sgps.experiments.plan import read_plan
from sgps.experiments.progress import ProgressDisplay
from sgps.experiments.tomlfile import dumps
from sgps.runs.run import loop_state
from sgps.training.recipes import RECIPES

from comparisons import SMOKE_CONFIG, SMOKE_OPTIONS, compare_smoke, smoke_comparison, smoke_document, write_config
from conftest import REPO

#: Every per-row metrics file of a run, test rows included.
METRICS = ("train", "validate", "outstanding", "learning", "test-test")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return smoke_comparison(tmp_path_factory)


def rows_without_time(run: Path, name: str) -> list[dict[str, str]]:
    """The rows of a metrics CSV without its wall-clock column (the one thing two runs may differ in)."""
    with open(run / "metrics" / f"{name}.csv", newline="") as handle:
        return [{key: value for key, value in row.items() if key != "seconds"} for row in csv.DictReader(handle)]


def one_run_config(tmp_path: Path, algorithm: str) -> Path:
    """The smoke config cut down to one algorithm and seed 0: its run is the smoke comparison's."""
    document = smoke_document()
    document["compare"].update(algorithms=[algorithm], seeds=[0])
    return write_config(tmp_path / f"{algorithm}.toml", document)


# -- the concurrency planner ------------------------------------------------------------


@given(
    cores=st.integers(1, 256),
    runs=st.integers(0, 1000),
    jobs=st.none() | st.integers(1, 512),
    threads=st.none() | st.integers(1, 512),
)
def test_the_planner_never_assigns_more_threads_than_usable_cores(cores, runs, jobs, threads):
    plan = plan_concurrency(cores, runs, jobs=jobs, threads=threads)
    assert plan.jobs * plan.threads * plan.workers <= cores
    assert plan.jobs >= 1 and plan.threads >= 1 and plan.workers == 1
    assert plan.jobs <= max(runs, 1)


def test_the_planner_spreads_spare_cores_as_threads():
    assert plan_concurrency(2, 10) == Concurrency(jobs=2, threads=1)
    assert plan_concurrency(16, 5) == Concurrency(jobs=5, threads=3)
    assert plan_concurrency(8, 1) == Concurrency(jobs=1, threads=8)
    assert plan_concurrency(2, 10, jobs=8) == Concurrency(jobs=2, threads=1)
    assert plan_concurrency(4, 10, threads=2) == Concurrency(jobs=2, threads=2)


def test_runs_get_the_planned_threads_and_search_in_their_own_process(smoke):
    command = (smoke / "logs" / "phs-s0.log").read_text().splitlines()[0]
    assert "train" in command and "--threads 1" in command and "--workers 1" in command


def test_a_runs_tests_spread_its_threads_over_search_processes_with_the_same_record(smoke, tmp_path, capsys):
    out = tmp_path / "comparison"
    shutil.copytree(smoke, out)
    run = out / "runs" / "phs-sg-s0"
    (run / "metrics" / "test-test.csv").unlink()
    assert main(["compare", str(SMOKE_CONFIG), "--out", str(out), "--threads", "2", "--jobs", "1"]) == 0
    log = (out / "logs" / "phs-sg-s0.log").read_text()
    assert [line for line in log.splitlines() if " test " in line and "--workers 2" in line]
    assert rows_without_time(run, "test-test") == rows_without_time(smoke / "runs" / "phs-sg-s0", "test-test")


# -- resuming -----------------------------------------------------------------------------


def test_running_compare_again_repeats_no_finished_run(smoke, tmp_path_factory, capsys):
    def files() -> dict[Path, int]:
        return {path: path.stat().st_mtime_ns for folder in ("runs", "logs") for path in (smoke / folder).rglob("*")}

    before = files()
    assert compare_smoke(tmp_path_factory) == 0
    assert "4 runs: 4 done (4 earlier), 0 paused, 0 failed" in capsys.readouterr().out
    assert files() == before


def test_a_finished_run_that_lost_its_trainer_checkpoint_is_never_retrained_over(smoke, tmp_path, capsys):
    out = tmp_path / "lost"
    shutil.copytree(smoke, out, ignore=shutil.ignore_patterns(".lock", ".*.tmp"))
    run = out / "runs" / "phs-s1"
    (run / "checkpoints" / "trainer.pt").unlink()
    kept = {path: path.read_bytes() for path in run.rglob("*") if path.is_file()}
    assert main(["compare", str(SMOKE_CONFIG), "--out", str(out), *SMOKE_OPTIONS]) == 1
    error = capsys.readouterr().err
    assert "phs-s1:" in error and "no checkpoints/trainer.pt" in error and "test-test.csv" in error
    assert {path: path.read_bytes() for path in run.rglob("*") if path.is_file()} == kept


@pytest.mark.parametrize("damage", [b"\xff\xfe not text", b"[compare\n", b"[problems]\n"])
def test_a_damaged_compare_toml_is_one_error_line_naming_it(smoke, tmp_path, capsys, damage):
    out = tmp_path / "damaged"
    shutil.copytree(smoke, out, ignore=shutil.ignore_patterns(".lock", ".*.tmp"))
    (out / "compare.toml").write_bytes(damage)
    runs = {path: path.read_bytes() for path in (out / "runs").rglob("*") if path.is_file()}
    assert main(["compare", str(SMOKE_CONFIG), "--out", str(out), *SMOKE_OPTIONS]) == 2
    error = capsys.readouterr().err
    assert error.startswith("sgps: error: ") and error.count("\n") == 1 and "compare.toml" in error, error
    assert {path: path.read_bytes() for path in runs} == runs


def test_a_problem_file_edited_after_the_runs_is_named_by_compare_and_report(smoke, tmp_path, capsys):
    out = tmp_path / "edited"
    shutil.copytree(smoke, out, ignore=shutil.ignore_patterns(".lock", ".*.tmp"))
    digests = (out / "problems" / "digests.json").read_text()
    (out / "problems" / "digests.json").unlink()  # a comparison started before digests were kept
    assert main(["compare", str(SMOKE_CONFIG), "--out", str(out), *SMOKE_OPTIONS]) == 0
    assert (out / "problems" / "digests.json").read_text() == digests  # recorded on the next start
    test_file = out / "problems" / "tests" / "test.txt"
    lines = test_file.read_text().splitlines(keepends=True)
    test_file.write_text("".join([lines[0], lines[2], lines[1], *lines[3:]]))  # two levels swapped
    runs = {path: path.read_bytes() for path in (out / "runs").rglob("*") if path.is_file()}
    capsys.readouterr()
    assert main(["compare", str(SMOKE_CONFIG), "--out", str(out), *SMOKE_OPTIONS]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"sgps: error: {test_file}: its levels differ from those this comparison wrote")
    assert {path: path.read_bytes() for path in runs} == runs
    assert main(["report", str(out)]) == 0
    assert f"sgps: warning: {test_file}: the levels differ from those the runs searched" in capsys.readouterr().err
    assert "**Problem files changed** since the runs searched them: `problems/tests/test.txt`" in (
        (out / "report.md").read_text()
    )


def test_a_comparison_is_never_written_into_a_run_directory(smoke, tmp_path, capsys):
    run = smoke / "runs" / "phs-s0"
    for out in (run, run / "metrics" / "comparison"):
        before = sorted(path for path in run.rglob("*"))
        assert main(["compare", str(SMOKE_CONFIG), "--out", str(out), *SMOKE_OPTIONS]) == 2
        error = capsys.readouterr().err
        assert f"--out {run} is a run folder (sgps train made it" in error or f"inside the run folder {run}" in error
        assert sorted(path for path in run.rglob("*")) == before


def test_partial_training_resumes_to_the_rows_of_an_uninterrupted_run(smoke, tmp_path, capsys):
    config, out = one_run_config(tmp_path, "phs-sg"), tmp_path / "comparison"
    run = out / "runs" / "phs-sg-s0"
    assert main(["compare", str(config), "--out", str(out), *SMOKE_OPTIONS, "--max-batches", "1"]) == 0
    assert "1 runs: 0 done (0 earlier), 1 paused" in capsys.readouterr().out
    assert loop_state(run)["finished"] is False
    assert not (run / "metrics" / "test-test.csv").exists()
    assert len(rows_without_time(run, "train")) == 16  # one batch of the tiny preset

    assert main(["compare", str(config), "--out", str(out), *SMOKE_OPTIONS]) == 0
    assert "1 runs: 1 done (0 earlier)" in capsys.readouterr().out
    assert "--resume" in (out / "logs" / "phs-sg-s0.log").read_text()
    for name in METRICS:
        assert rows_without_time(run, name) == rows_without_time(smoke / "runs" / "phs-sg-s0", name), name


def test_a_session_pauses_a_comparison_and_the_next_one_ends_it_as_an_uninterrupted_one(smoke, tmp_path, capsys):
    config, out = one_run_config(tmp_path, "phs-sg"), tmp_path / "comparison"
    run = out / "runs" / "phs-sg-s0"
    assert main(["compare", str(config), "--out", str(out), *SMOKE_OPTIONS, "--session-minutes", "1e-9"]) == 0
    assert "1 runs: 0 done (0 earlier), 1 paused" in capsys.readouterr().out
    assert not (run / "checkpoints" / "trainer.pt").exists()  # nothing starts once the time is up

    assert main(["compare", str(config), "--out", str(out), *SMOKE_OPTIONS, "--session-minutes", "60"]) == 0
    assert "1 runs: 1 done (0 earlier)" in capsys.readouterr().out
    assert "--session-minutes" in (out / "logs" / "phs-sg-s0.log").read_text()
    for name in METRICS:
        assert rows_without_time(run, name) == rows_without_time(smoke / "runs" / "phs-sg-s0", name), name


def test_a_killed_comparison_stops_its_runs_and_resumes_them(smoke, tmp_path):
    config, out = one_run_config(tmp_path, "phs"), tmp_path / "comparison"
    run = out / "runs" / "phs-s0"
    command = [sys.executable, "-m", "sgps", "compare", str(config), "--out", str(out), *SMOKE_OPTIONS]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    deadline = time.monotonic() + 90
    while process.poll() is None and time.monotonic() < deadline:
        if (run / "checkpoints" / "trainer.pt").exists():
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) in (0, 143)  # 0: it had finished before the signal
    assert processes_mentioning(str(out)) == []

    assert main(["compare", str(config), "--out", str(out), *SMOKE_OPTIONS]) == 0
    assert loop_state(run)["finished"] is True
    for name in METRICS:
        assert rows_without_time(run, name) == rows_without_time(smoke / "runs" / "phs-s0", name), name


def processes_mentioning(text: str) -> list[str]:
    """Command lines of the processes whose arguments contain `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                arguments = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in arguments:
                found.append(arguments)
    return found


def test_a_changed_config_is_refused_naming_the_changed_keys(smoke, tmp_path, capsys):
    document = smoke_document()
    document["compare"]["seeds"] = [1, 2]  # seed 0 dropped: its finished runs would be orphaned
    document["tests"]["test"]["rounds"] = 3
    config = write_config(tmp_path / "changed.toml", document)
    stored = (smoke / "compare.toml").read_text()
    assert main(["compare", str(config), "--out", str(smoke)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert f"sgps: error: {config}: compare.seeds, tests.test.rounds: differ from {smoke / 'compare.toml'}" in error
    assert (smoke / "compare.toml").read_text() == stored
    assert not (smoke / "runs" / "phs-s2").exists()


def test_adding_an_algorithm_grows_the_comparison_and_keeps_the_finished_runs(smoke, tmp_path, capsys):
    out = tmp_path / "grown"
    shutil.copytree(smoke, out, ignore=shutil.ignore_patterns(".lock", ".*.tmp"))
    finished = {path: path.read_bytes() for path in (out / "runs").rglob("*") if path.is_file()}
    document = smoke_document()
    document["compare"]["algorithms"] = ["phs", "phs-sg", "wastar"]
    document["compare"]["seeds"] = [0]  # fewer seeds than before is a change, not an addition
    config = write_config(tmp_path / "fewer-seeds.toml", document)
    assert main(["compare", str(config), "--out", str(out)]) == 2
    assert "compare.seeds: differ from" in capsys.readouterr().err

    document["compare"]["seeds"] = [0, 1]
    config = write_config(tmp_path / "grown.toml", document)
    assert main(["compare", str(config), "--out", str(out), *SMOKE_OPTIONS]) == 0
    printed = capsys.readouterr().out
    assert "runs: 4 done, 2 running, 0 waiting" in printed  # the finished runs count as done from the start
    assert "6 runs: 6 done (4 earlier), 0 paused, 0 failed" in printed
    assert {path: path.read_bytes() for path in finished} == finished
    assert read_plan(out / "compare.toml").variants == ("phs", "phs-sg", "wastar")
    assert main(["report", str(out)]) == 0
    assert "WA\\*" in (out / "report.md").read_text()


def test_raising_a_limit_carries_a_finished_comparison_on_to_the_run_started_with_it(tmp_path, capsys):
    def config(name: str, max_expansions: int) -> Path:
        document = smoke_document()
        document["compare"].update(algorithms=["phs"], seeds=[0])
        document["train"]["bootstrap"].update(max_iterations=2, max_expansions=max_expansions)
        return write_config(tmp_path / f"{name}.toml", document)

    carried, uninterrupted = tmp_path / "carried", tmp_path / "uninterrupted"
    run = carried / "runs" / "phs-s0"
    assert main(["compare", str(config("small", 2_000)), "--out", str(carried), *SMOKE_OPTIONS]) == 0
    stopped = loop_state(run)
    assert stopped["finished"] and stopped["stop_reason"] == "expansion limit"
    assert stopped["iteration"] == 0 and stopped["cumulative_expansions"] >= 2_000
    tested_before = rows_without_time(run, "test-test")
    capsys.readouterr()

    lowered = config("lowered", 1_000)
    kept = {path: path.read_bytes() for path in carried.rglob("*") if path.is_file() and path.name != ".lock"}
    assert main(["compare", str(lowered), "--out", str(carried), *SMOKE_OPTIONS]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "phs-s0: bootstrap.max_expansions 2,000 -> 1,000, lower than in" in error
    assert {path: path.read_bytes() for path in kept} == kept  # the refusal wrote nothing
    assert loop_state(run) == stopped

    raised = config("raised", 10**9)
    assert main(["compare", str(raised), "--out", str(carried), *SMOKE_OPTIONS]) == 0
    assert "1 runs: 1 done (0 earlier)" in capsys.readouterr().out
    assert "--max-expansions 1000000000" in (carried / "logs" / "phs-s0.log").read_text()
    assert "limits raised: continuing" in (run / "log.txt").read_text()
    assert loop_state(run)["iteration"] == 2
    assert read_plan(carried / "compare.toml").runs[0].config.bootstrap.max_expansions == 10**9
    assert rows_without_time(run, "test-test") != tested_before  # tested again, with the weights trained on

    assert main(["compare", str(raised), "--out", str(uninterrupted), *SMOKE_OPTIONS]) == 0
    other = uninterrupted / "runs" / "phs-s0"
    for name in METRICS:
        assert rows_without_time(run, name) == rows_without_time(other, name), name
    weights = [load_file(folder / "checkpoints" / "latest.safetensors") for folder in (run, other)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])  # bit for bit


def test_hips_settings_count_as_added_only_when_no_earlier_run_read_them(tmp_path):
    before = tmp_path / "before"
    before.mkdir()
    (before / "compare.toml").write_text(dumps(read_plan(SMOKE_CONFIG).resolved))
    document = smoke_document()
    document["compare"]["algorithms"] = ["phs", "phs-sg", "hips-eps"]
    document["hips"] = {"epochs": 2}
    grown = write_config(tmp_path / "with-hips.toml", document)
    _refuse_changes(grown, before, read_plan(grown))  # a new algorithm and its settings: accepted

    started = tmp_path / "started"
    started.mkdir()
    (started / "compare.toml").write_text(dumps(read_plan(grown).resolved))
    document["hips"] = {"epochs": 3}
    changed = write_config(tmp_path / "changed-hips.toml", document)
    with pytest.raises(ConfigError, match=r"hips\.epochs: differ from"):
        _refuse_changes(changed, started, read_plan(changed))


# -- config errors ------------------------------------------------------------------------


def _set(path: str, value: Any) -> Any:
    """A change to the smoke config: set the value at a dotted path."""

    def change(document: dict[str, Any]) -> None:
        *tables, key = path.split(".")
        for table in tables:
            document = document.setdefault(table, {})
        document[key] = value

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_set("compare.algorithms", ["phs", "phs-xx"]), "compare.algorithms: unknown algorithm 'phs-xx'"),
        (_set("compare.domain", "chess"), "compare.domain: unknown domain 'chess'"),
        (_set("compare.colour", "red"), "compare.colour: unknown key"),
        (_set("extras.x", 1), "extras: unknown section"),
        (_set("train.bootstrap.batchsize", 3), "train.bootstrap.batchsize: unknown key (keys: seed, batch_size"),
        (_set("train.optimiser.lr", 3), "train.optimiser: unknown section of the training config"),
        (_set("train.bootstrap.batch_size", "many"), "train.bootstrap.batch_size: must be an integer from 1 to"),
        (_set("train.bootstrap.schedule", "triple"), "train.bootstrap.schedule: must be one of double, lts-cm"),
        (_set("train.bootstrap.seed", 3), "train.bootstrap.seed: set by compare.seeds"),
        (_set("train.run.validation_fraction", 0.2), "train.run.validation_fraction: set by problems.train.validation"),
        (_set("tests.test.rounds", 0), "tests.test.rounds: must be at least 1, got 0"),
        (_set("compare.seeds", [0, -1]), "compare.seeds: must be a non-empty list of integers >= 0"),
        (_set("problems.train.variant", "huge"), "problems.train.variant: tsp has no generator variant 'huge'"),
        (_set("problems.train.params.towns", 3), "problems.train.params: unknown tsp generator parameter 'towns'"),
        (_set("problems.train.validation", 28), "problems.train.validation: must be less than"),
        (_set("tests.test", {"file": "missing.txt"}), "tests.test.file: no such level file or folder"),
        (_set("variants.phs-sg.subgoal.codebook_size", 0),
         "variants.phs-sg.subgoal.codebook_size: must be an integer from 1 to 1,024, got 0"),
        (_set("variants.k1.algorithm", "phs-sg"), "variants.k1: not listed in compare.algorithms"),
        (_set("paper.phs.test", [100, 2]), "paper.phs.test: give [solved] or [solved, mean expansions, mean length]"),
        (_set("paper.phs.train", [1e6, -2.0, 3]), "paper.phs.train: must be a list of finite numbers >= 0"),
        (_set("problems.train.count", 10**12), "problems.train.count: must be at most 1,000,000, got 1,000,000,000"),
        (_set("train.learner.learning_rate", 1e308), "train.learner.learning_rate: must be in (0, 1], got 1e+308"),
    ],
)  # fmt: skip
def test_a_bad_config_is_one_error_line_naming_the_key_and_nothing_starts(tmp_path, capsys, change, message):
    document = smoke_document()
    change(document)
    config = write_config(tmp_path / "bad.toml", document)
    out = tmp_path / "comparison"
    assert main(["compare", str(config), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"sgps: error: {config}: ") and error.count("\n") == 1
    assert message in error
    assert not out.exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("test = [nan]", "paper.phs.test: must be a list of finite numbers >= 0, got [nan]"),
        ("distance = inf", "paper.phs.distance: must be a finite number >= 0, got inf"),
    ],
)
def test_the_papers_numbers_are_finite(tmp_path, capsys, line, message):
    config = write_config(tmp_path / "bad.toml", smoke_document())
    config.write_text(config.read_text() + f"\n[paper.phs]\n{line}\n")
    out = tmp_path / "comparison"
    assert main(["compare", str(config), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_train_checks_its_thread_and_batch_options(tmp_path, capsys):
    levels = tmp_path / "levels.txt"
    assert main(["generate", "tsp", "--count", "4", "--out", str(levels)]) == 0
    for option, message in (("--threads", "--threads must be from 1 to"), ("--max-batches", "must be at least 1")):
        argv = ["train", "--problems", str(levels), "--out", str(tmp_path / "run"), "--preset", "tiny", option, "0"]
        assert main(argv) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_progress_is_printed_as_lines_when_not_a_terminal():
    stream = io.StringIO()
    display = ProgressDisplay(stream, tty=False, interval=0.0)
    display.event("phs-s0: training")
    display.status(["runs: 0 done, 1 running, 0 waiting", "  phs-s0: training, pass 1"])
    display.status(["runs: 0 done, 1 running, 0 waiting", "  phs-s0: training, pass 1"])  # unchanged: not repeated
    assert stream.getvalue() == "phs-s0: training\nruns: 0 done, 1 running, 0 waiting\n  phs-s0: training, pass 1\n"
    assert "\x1b" not in stream.getvalue()


# -- the shipped configs ------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.toml")), ids=lambda path: path.name)
def test_every_shipped_config_is_valid_and_at_its_scale(path):
    # The Sokoban configs name the Boxoban files by paths relative to the repository (../shared).
    beside = (REPO.parent / "shared" / "data" / "boxoban").is_dir()
    plan = read_plan(path, check_files=beside or "sokoban" not in path.name)
    cap = {test.budget * 2 ** (test.rounds - 1) for test in plan.tests}
    limits = {run.config.bootstrap.time_limit_minutes for run in plan.runs if run.config is not None}
    if path.name.endswith(".paper.toml"):
        assert {run.config.network.channels for run in plan.runs if run.config} == {128}
        assert plan.seeds == (0, 1, 2, 3, 4)
        assert plan.held_out in (0, 1000) and {test.source.count for test in plan.tests} == {100}
        if plan.held_out:
            assert plan.train.count == 11_000
        assert (cap, limits) == (({512_000}, {1920.0}) if path.name.startswith("hard-") else ({4_096_000}, {0.0}))
    elif path.name.endswith(".cpu.toml"):
        assert {run.config.network.channels for run in plan.runs if run.config} == {32} and len(plan.seeds) == 3
        assert cap == {8_000}
    budgets = {run.config.bootstrap.max_expansions for run in plan.runs if run.config is not None}
    if path.name != "smoke.toml" and budgets:  # smoke: one pass, a check of the pipeline, not a comparison
        # Expansions decide a comparison: one training budget for all its algorithms; the clock is a guard.
        (budget,) = budgets
        assert budget > 0 and all(limit == 0 or limit >= 20 for limit in limits)
    assert {run.algorithm for run in plan.runs} <= {"phs-sg", "levin-sg", "phs", "levin", "wastar", "hips-eps"}
    assert set(plan.paper) <= set(plan.variants)
    assert tomllib.loads(dumps(plan.resolved)) == plan.resolved  # what compare.toml holds reads back the same
    if plan.train.variant == "hard":  # the configs of measured tables name their recipe: a new default changes none
        recipe = tomllib.loads(path.read_text())["train"]["run"]["recipe"]
        assert recipe in RECIPES  # not "auto"
        if path.name.endswith((".paper.toml", ".cpu.toml")):  # those reproducing the paper's tables: its loop
            assert recipe == "paper"
