"""The π_low diagnostics of benchmarks/ (pair_labels.py, code_refit.py, dead_features.py) on a tiny
π^SG run, and what search_progress.py measures and draws.

They decide what docs/results/hard-boulderdash-campaign-log.md says about why π_low ignores its
code, so their rows must keep adding up: shares within [0, 1], the departing rows a part of all rows, the variants
that read no code reporting no code effect, and the refits fitted on the rows they name.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest
import torch

from sgps.cli import main
from sgps.domains import craftworld, get_domain, read_levels, write_levels
from sgps.domains.generation import generate_levels, resolve_params
from sgps.training.config import load_run_config
from sgps.training.setup import build_method

from conftest import REPO

#: A budget at which every tiny TSP search fails, so that every tree gives failed-tree pairs.
FAILING_BUDGET = 40


@pytest.fixture(scope="module")
def subgoal_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A PHS*(π^SG) run of one iteration on 12 small TSP levels, and its problems file."""
    folder = tmp_path_factory.mktemp("diagnostics")
    domain = get_domain("tsp")
    problems = folder / "levels.txt"
    write_levels(problems, domain, [domain.generate(seed, size=8, cities=5) for seed in range(12)])
    run = folder / "run"
    assert main(["train", "--problems", str(problems), "--out", str(run), "--algorithm", "phs-sg",
                 "--preset", "tiny", "--device", "cpu", "--max-iterations", "1", "--quiet"]) == 0  # fmt: skip
    return run, problems


def run_script(script: str, *arguments: object) -> list[dict[str, str]]:
    """Run benchmarks/`script` with `arguments` and a ``--csv`` file; its rows."""
    out = Path(str(arguments[0])).parent / f"{script}.csv"
    command = [sys.executable, str(REPO / "benchmarks" / script), *map(str, arguments), "--csv", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    with out.open() as handle:
        return list(csv.DictReader(handle))


def benchmark_module(script: str, monkeypatch: pytest.MonkeyPatch | None = None) -> ModuleType:
    """benchmarks/`script` imported as a module; with `monkeypatch`, registered in `sys.modules` for
    the test (a script whose dataclasses look their module up needs it)."""
    name = Path(script).stem
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / script)
    module = importlib.util.module_from_spec(spec)
    if monkeypatch is not None:
        monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def share(value: str) -> float:
    number = float(value)
    assert math.isnan(number) or 0.0 <= number <= 1.0, value
    return number


def test_pair_labels_scores_the_failed_tree_rows_of_each_weights_file(subgoal_run):
    run, problems = subgoal_run
    rows = run_script("pair_labels.py", run, "--problems", problems, "--count", 6, "--budget", FAILING_BUDGET,
                      "--weights", "untrained", "latest")  # fmt: skip
    assert [row["weights"] for row in rows] == ["untrained", "latest"]
    assert rows[0]["updates"] == "0"
    for row in rows:
        assert int(row["rows"]) >= int(row["pairs"]) > 0  # every pair has at least one step
        for key in ("search_first", "own_code", "other_code", "code_changes"):
            share(row[key])


def test_code_refit_fits_each_variant_on_the_rows_it_names(subgoal_run):
    run, problems = subgoal_run
    rows = run_script("code_refit.py", run, "--problems", problems, "--count", 8, "--budget", FAILING_BUDGET,
                      "--weights", "latest", "--epochs", 2, "--pairs-per-tree", 8, "--codebooks", 2, 6)  # fmt: skip
    variants = {row["pi_low"]: row for row in rows}
    assert list(variants) == [
        "as-is",
        "refit-all",
        "refit-departing",
        "fresh-none",
        "fresh-code",
        "fresh-decoded",
        "fresh-target",
        "vq-2",
        "joint-2",
        "vq-6",
        "joint-6",
    ]
    all_rows = int(variants["refit-all"]["fit_rows"])
    assert int(variants["as-is"]["fit_rows"]) == 0
    assert 0 < int(variants["refit-departing"]["fit_rows"]) < all_rows
    fresh = [name for name in variants if name.startswith(("fresh-", "vq-", "joint-"))]
    assert all(int(variants[name]["fit_rows"]) == all_rows for name in fresh)
    for row in rows:
        assert 0 < int(row["held_departing"]) < int(row["held_rows"])
        for key in ("own", "other", "changes"):
            share(row[f"held_{key}"]), share(row[f"departing_{key}"])
    for name in ("fresh-none", "fresh-target"):  # they read no code: nothing to compare with another
        assert math.isnan(float(variants[name]["held_other"]))
    for name in ("as-is", "refit-all", "refit-departing", "fresh-code", "fresh-decoded", "vq-6", "joint-2"):
        assert not math.isnan(float(variants[name]["held_changes"]))


def test_code_refit_holds_out_whole_trees_whatever_cluster_level_their_pairs_came_from(monkeypatch):
    """Rows of one tree share states, so a tree must fall on one side of the split; hard CraftWorld
    draws every pair at one cluster level, which a split by level would leave with nothing held out."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    code_refit = benchmark_module("code_refit.py", monkeypatch)
    lengths, trees = [2, 1, 3, 2, 1, 2], [0, 0, 1, 2, 3, 3]  # the steps and the failed tree of each pair
    rows = sum(lengths)
    samples = SimpleNamespace(failed_paths=[(0, 0, length) for length in lengths], failed_low=np.arange(rows),
                              pair_trees=trees, levels_used=[3] * len(lengths))  # fmt: skip
    tensors = {"states": torch.zeros(rows, 1), "targets": torch.zeros(rows, 1), "codes": torch.zeros(rows),
               "actions": torch.arange(rows), "searched": torch.zeros(rows)}  # fmt: skip
    monkeypatch.setattr(code_refit, "failed_tree_rows", lambda method, drawn: tensors)
    held = code_refit.failed_rows(None, samples, np.random.default_rng(0)).held_out.tolist()
    tree_of_row = [tree for tree, length in zip(trees, lengths, strict=True) for _ in range(length)]
    sides = {tree: {side for side, of in zip(held, tree_of_row, strict=True) if of == tree} for tree in set(trees)}
    assert all(len(side) == 1 for side in sides.values())  # no tree split between the halves
    assert sum(side == {True} for side in sides.values()) == 2  # half of the 4 trees held out


def test_the_probe_curve_averages_each_full_window_of_updates(tmp_path):
    search_progress = benchmark_module("search_progress.py")
    window = search_progress.PROBE_WINDOW
    (tmp_path / "metrics").mkdir()
    values = ["" if update == 3 else f"{update / 100:.2f}" for update in range(2 * window + 3)]  # a batch unprobed
    with (tmp_path / "metrics" / "learning.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["iteration", "batch", "probe_reached"])
        writer.writerows([0, update, value] for update, value in enumerate(values))
    updates, means = search_progress.probe_curve(tmp_path)
    first = [update / 100 for update in range(window) if update != 3]
    second = [update / 100 for update in range(window, 2 * window)]
    assert updates == [window, 2 * window]  # the 3 updates of the unfinished window are left out
    assert means == pytest.approx([sum(first) / len(first), sum(second) / len(second)])
    assert search_progress.probe_curve(tmp_path / "elsewhere") == ([], [])


def test_the_solved_panels_turn_logarithmic_once_a_run_takes_off(tmp_path):
    search_progress = benchmark_module("search_progress.py")
    runs = {}
    for name, outstanding in (("flat", [10_000, 10_000, 9_999, 9_995]), ("off", [10_000, 9_990, 9_500, 8_978])):
        (tmp_path / name / "metrics").mkdir(parents=True)
        with (tmp_path / name / "metrics" / "outstanding.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["iteration", "batch", "cumulative_expansions", "outstanding", "seconds"])
            writer.writerows([0, batch - 1, batch * 500_000, left, batch] for batch, left in enumerate(outstanding))
        runs[name] = tmp_path / name
    few = search_progress.plot({}, {"flat": runs["flat"]}, tmp_path / "few.png")
    many = search_progress.plot({}, runs, tmp_path / "many.png")
    assert (tmp_path / "few.png").stat().st_size > 0 and (tmp_path / "many.png").stat().st_size > 0
    assert [axis.get_yscale() for axis in few.axes[:2]] == ["linear", "linear"]
    assert few.axes[0].get_ylim() == (0, 11)  # 5 solved: twice that, the upper half for the legend
    assert [axis.get_yscale() for axis in many.axes[:2]] == ["symlog", "symlog"]  # 1,022 solved beside 5
    assert many.axes[0].get_ylim()[1] > 1_022


def test_search_progress_measures_craftworld_in_use_actions_done_and_draws_older_rows(tmp_path):
    search_progress = benchmark_module("search_progress.py")
    domain = get_domain("craftworld")
    level = generate_levels(domain, resolve_params(domain, "hard", {"goal": "iron_pick"}), 20000, 1)[0]
    held = bytearray(level.inventory)
    held[craftworld.STICK] = held[craftworld.BRONZE_BAR] = 1  # 7 of the iron pick's 10 Use actions done
    states = [level, level._replace(inventory=bytes(held))]
    assert search_progress.furthest(domain, level, states[:1]) == 0
    assert search_progress.furthest(domain, level, states) == 7
    assert search_progress.furthest(get_domain("tsp"), level, states) == 0  # no steps defined there
    rows = {"before": [{"updates": "0", "gems": "1.5", "depth": "30.0"}],  # a file from before CraftWorld
            "now": [{"updates": "4", "reached": "7.0", "depth": "41.0"}]}  # fmt: skip
    figure = search_progress.plot(rows, {}, tmp_path / "steps.png")
    drawn = [line.get_ydata()[0] for line in figure.axes[2].get_lines()]
    assert drawn == [1.5, 7.0] and (tmp_path / "steps.png").stat().st_size > 0


def test_search_progress_counts_the_solves_within_a_smaller_budget_as_a_search_at_that_budget(subgoal_run):
    """``--within b`` reads the solves of a search at b off one search at a larger budget: the
    budget only stops a search, so the two must agree level by level (the budget sweeps of
    docs/results/hard-boulderdash-campaign-log.md rest on it), a level solved by a child of the
    b-th pop included: the search at b stops at that pop (with these weights, one of the 12 levels)."""
    run, problems = subgoal_run
    large = run_script("search_progress.py", run, "--problems", problems, "--count", 12, "--budget", 3000,
                       "--weights", "latest", "--within", 800, 2400, 3000)  # fmt: skip
    within = [int(large[0][f"solved_within_{bound}"]) for bound in (800, 2400, 3000)]
    assert within == sorted(within) and within[-1] == int(large[0]["solved"])
    assert 0 < within[1] < within[2]  # solves below and above 2,400, so the check below means something
    small = run_script("search_progress.py", run, "--problems", problems, "--count", 12, "--budget", 2400,
                       "--weights", "latest")  # fmt: skip
    assert int(small[0]["solved"]) == within[1]


@pytest.mark.parametrize("mixture", [None, "arithmetic"])
def test_search_progress_alpha_searches_with_pi_unc_alone_at_one_and_the_codes_alone_at_zero(subgoal_run, mixture):
    """``--alpha`` decides docs/results/hard-craftworld.md's comparison of π^SG's parts: it must
    reach the training and the test evaluators alike, under the run's own (geometric) mixture and
    the arithmetic one, and at 1 the searching policy must be π_unc's."""
    search_progress = benchmark_module("search_progress.py")
    run, problems = subgoal_run
    levels = read_levels(problems)
    config = load_run_config(run / "config.toml")
    assert config.subgoal.mixture == "geometric"
    assert search_progress.policy_settings(config, None, None) == config
    states = levels.states()[:4]
    for alpha in (0.0, 1.0):
        changed = search_progress.policy_settings(config, mixture, alpha)
        method = search_progress.method_with_weights(run, "latest", levels.domain, states[0], changed)
        for evaluator in (method.evaluator(), method.test_evaluator()):
            assert (evaluator.alpha, evaluator.mixture) == (alpha, mixture or "geometric")
        log_policy, _ = method.evaluator()(states)
        with torch.inference_mode():
            log_high, log_low, log_unconditional, _ = method.model.components(
                torch.as_tensor(levels.domain.observe(states), dtype=torch.float32))
        if alpha == 1.0:
            expected = log_unconditional  # the geometric mixture's 1e-8 floor moves it by less than the tolerance
        elif mixture == "arithmetic":
            expected = torch.logsumexp(log_low + log_high.unsqueeze(2), dim=1)
        else:
            expected = torch.log_softmax((log_high.exp().unsqueeze(2) * torch.log(log_low.exp() + 1e-8)).sum(1), dim=1)
        assert np.allclose(log_policy, expected.double().numpy(), atol=1e-5)


def test_paired_runs_counts_the_searches_both_runs_made_and_tests_the_problems_one_alone_solved(tmp_path):
    header = "iteration,batch,problem,budget,solved,expanded,length,seconds\n"
    for name, rows in (("a", ["0,1,7,9,1,50,12,0", "0,1,8,9,0,90,,0", "0,2,3,9,0,90,,0"]),
                       ("b", ["0,0,5,9,1,10,4,0", "0,1,7,9,0,90,,0", "0,1,8,9,1,60,20,0"])):  # fmt: skip
        (tmp_path / name / "metrics").mkdir(parents=True)
        (tmp_path / name / "metrics" / "train.csv").write_text(header + "\n".join(rows) + "\n")
    command = [sys.executable, str(REPO / "benchmarks" / "paired_runs.py"), str(tmp_path / "a"), str(tmp_path / "b"),
               "--from-batch", "1"]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "2 searches both made" in done.stdout  # batch 0 is before --from-batch, batch 2 only a's
    assert "both solved 0; only" in done.stdout and "sign test p = 0.750" in done.stdout  # 1 against 1: P(X >= 1)
    paired_runs = benchmark_module("paired_runs.py")
    assert paired_runs.sign_test(6, 3) == 130 / 512 and paired_runs.sign_test(0, 0) == 1.0
    # --learning: the learners' columns, per window of the batches both learned from
    learning = "iteration,batch,loss_low,probe_low_accuracy\n"
    (tmp_path / "a" / "metrics" / "learning.csv").write_text(learning + "0,0,3200,0.1\n0,1,1600,0.3\n0,2,800,\n")
    (tmp_path / "b" / "metrics" / "learning.csv").write_text(learning + "0,1,800,0.5\n0,2,400,0.7\n0,3,0,0.9\n")
    done = subprocess.run([*command, "--window", "1", "--learning", "loss_low/1600", "probe_low_accuracy"], cwd=REPO,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "learning updates both made: 2;" in lines[-4]  # batches 1 and 2 (0 is before --from-batch, 3 only b's)
    assert lines[-2:] == ["1-1 | 1.00 / 0.50 | 0.30 / 0.50", "2-2 | 0.50 / 0.25 | - / 0.70"]  # not measured: -
    done = subprocess.run([*command, "--learning", "loss_hgh"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode != 0 and "no column loss_hgh" in done.stderr


def test_dead_features_finds_a_pi_low_whose_reduction_is_below_zero_everywhere(subgoal_run, tmp_path):
    """The measurement behind docs/subgoals.md, "Dead features": weights whose π_low reduction is pushed
    below zero read as dead on every state; the run's own weights as the shares they are."""
    run, problems = subgoal_run
    config = load_run_config(run / "config.toml")
    levels = read_levels(problems, config.run.domain)
    method = build_method(levels.domain, levels.states()[0], config)
    method.load_model(run / "checkpoints" / "latest.safetensors")
    with torch.no_grad():
        method.learner.model.low.reduce.bias.fill_(-100.0)
    method.save_model(tmp_path / "dead.safetensors")
    rows = run_script("dead_features.py", run, "--problems", problems, "--count", 4, "--walk", 3,
                      "--weights", "latest", tmp_path / "dead.safetensors", "--inits", 3)  # fmt: skip
    assert [(row["weights"], row["network"], row["networks"]) for row in rows] == [
        ("latest", "high", "1"), ("latest", "low", "1"), ("dead.safetensors", "high", "1"),
        ("dead.safetensors", "low", "1"), ("fresh", "high", "3"), ("fresh", "low", "3")]  # fmt: skip
    assert all(int(row["states"]) > 4 for row in rows)  # the start states and their walks
    for row in rows[:4]:
        share(row["alive"]), share(row["dead_states"])
    dead = rows[3]
    assert (float(dead["alive"]), float(dead["dead_states"])) == (0.0, 1.0)
    assert all(float(value) < 0 for value in dead["largest"].split())
    assert (dead["dead_channel"], dead["under_10pc"], dead["all_dead"]) == ("1", "1", "1")
    assert rows[2]["alive"] == rows[0]["alive"]  # π_hi untouched
    for row in rows[4:]:  # counts of the 3 fresh networks
        share(row["alive"])
        assert 3 >= int(row["under_10pc"]) >= int(row["all_dead"]) >= 0 and 0 <= int(row["dead_channel"]) <= 3


def test_batch_time_reads_the_clock_of_the_batches_asked_for_and_the_validations_inside_it(tmp_path):
    """A range of batches is read as clock differences; a pass's validation counts with the batch
    after it, and the one after the last batch, outside every clock row, is never counted."""
    metrics = tmp_path / "run" / "metrics"
    metrics.mkdir(parents=True)
    clock = "0,-1,0,9,0\n0,0,100,9,10\n0,1,200,8,25\n1,0,300,8,50\n1,1,400,7,60\n"
    (metrics / "outstanding.csv").write_text("iteration,batch,cumulative_expansions,outstanding,seconds\n" + clock)
    (metrics / "train.csv").write_text("iteration,batch,seconds\n0,0,6\n0,0,2\n0,1,8\n1,0,9\n1,1,5\n")
    (metrics / "validate.csv").write_text("iteration,batch,seconds\n0,0,12\n0,0,3\n1,0,4\n")
    batch_time = benchmark_module("batch_time.py")
    run = tmp_path / "run"
    # (batches, expansions, total, search, validation, the rest): the last pass's validation (4 s) is left out
    assert batch_time.split(run) == (4, 400, 60.0, 28.0, 12.0, 20.0)
    assert batch_time.split(run, (0, 0)) == (1, 100, 10.0, 6.0, 0.0, 4.0)
    assert batch_time.split(run, (1, 2)) == (2, 200, 40.0, 17.0, 12.0, 11.0)  # pass 0's validation before (1, 0)
    assert batch_time.split(run, (3, 3)) == (1, 100, 10.0, 5.0, 0.0, 5.0)
    with pytest.raises(SystemExit, match="has batches 0 to 3, not 3 to 4"):
        batch_time.split(run, (3, 4))


def test_search_benchmark_leaves_its_stopwatch_out_of_the_engine_time():
    """benchmarks/search.py's engine time is the wall time less the domain's, the evaluator's and the
    stopwatch's own (about 10 wrapped calls an expansion): with the last left in, the engine reads
    about 1 µs an expansion slower than it is (docs/search.md)."""
    search_benchmark = benchmark_module("search.py")
    cost = search_benchmark.untimed_cost_per_call(calls=20_000)
    assert 0.0 < cost < 5e-6  # a Python call and return, well under the domain's step
    watch = search_benchmark.Stopwatch()
    timed = watch.wrap(abs)
    assert [timed(-2), timed(3)] == [2, 3] and watch.calls == 2 and watch.seconds > 0
    row = search_benchmark.throughput("tsp", 200, 1000)
    assert row["exact"] > 0 and row["lockstep"] > 0 and row["overhead_us"] > 0


def test_milestones_name_the_batch_that_reached_each_share_with_the_expansions_after_it(tmp_path):
    """A milestone is the first batch after which the share is solved: its cumulative expansions and
    the batches up to it, that one included (its searches had one update fewer behind them)."""
    metrics = tmp_path / "run" / "metrics"
    metrics.mkdir(parents=True)
    (metrics / "outstanding.csv").write_text("iteration,batch,cumulative_expansions,outstanding,seconds\n"
                                             "0,-1,0,10,0\n0,0,100000,10,360\n0,1,200000,9,720\n"
                                             "0,2,300000,5,1080\n0,3,400000,1,1440\n")  # fmt: skip
    command = [sys.executable, str(REPO / "benchmarks" / "milestones.py"), str(tmp_path / "run"), "--names", "r"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    cells = [cell.strip() for cell in done.stdout.splitlines()[-1].split("|")[1:-1]]
    assert cells[2:] == ["0.20 M (2 batches, 0.2 h)", "0.20 M (2 batches, 0.2 h)", "0.30 M (3 batches, 0.3 h)",
                         "0.40 M (4 batches, 0.4 h)", "9 solved at 0.40 M (4 batches)"]  # fmt: skip
