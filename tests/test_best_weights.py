"""Which weights `best` names, and the validations inside a pass that let it follow a long run.

On a hard set a pass is hundreds of batches: `best` chosen at pass ends only was, on the
hard BoulderDash campaign, the weights of the end of its first pass, whose validation had
solved nothing (0 of 20 official test levels solved, where the latest weights solved 20).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import sgps
from sgps.cli import main
from sgps.runs.run import best_weights, checkpoint_path, describe_weights


@pytest.fixture(scope="module")
def levels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("levels")
    train = folder / "train.txt"
    assert main(["generate", "tsp", "--count", "60", "--out", str(train)]) == 0
    return train


def _train(folder: Path, train: Path, **bootstrap: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{folder.name}.toml"
    config.write_text("[bootstrap]\n" + "".join(f"{key} = {value}\n" for key, value in bootstrap.items()))
    run = folder / "run"
    assert main(["train", "--problems", str(train), "--out", str(run), "--preset", "tiny", "--max-iterations", "1",
                 "--config", str(config), "--quiet"]) == 0  # fmt: skip
    return run


def _rows(run: Path, name: str) -> list[dict[str, str]]:
    with (run / "metrics" / f"{name}.csv").open() as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


def test_validations_inside_a_pass_choose_best_and_change_no_training_search(levels, tmp_path):
    plain = _train(tmp_path / "plain", levels, batch_size=8)
    often = _train(tmp_path / "often", levels, batch_size=8, validate_every=2)
    assert _rows(plain, "train") == _rows(often, "train")  # 54 training problems: 7 batches
    assert _rows(plain, "validate") == _rows(often, "validate")  # only the pass end's are recorded
    within = [line for line in (often / "log.txt").read_text().splitlines() if "validation solved" in line]
    assert [line.split(":")[0] for line in within] == [f"iteration 0 after batch {b}" for b in (1, 3, 5)]
    assert "validate_every = 2" in (often / "config.toml").read_text()


def test_best_means_the_latest_weights_until_a_validation_has_solved_a_problem(levels, tmp_path):
    starved = _train(tmp_path / "starved", levels, initial_budget=1)  # no search can solve with one expansion
    assert (starved / "checkpoints" / "best.safetensors").is_file()  # the pass end's validation wrote it
    latest = starved / "checkpoints" / "latest.safetensors"
    assert checkpoint_path(starved, "best") == latest
    assert "no validation has solved a problem yet" in describe_weights(starved, "best")
    assert "no validation has solved" in sgps.load(starved).weights_used
    solved = _train(tmp_path / "solved", levels)
    path, words = best_weights(solved)
    assert path == solved / "checkpoints" / "best.safetensors" and "validation pass that solved most" in words


def test_every_command_that_tests_says_which_weights(levels, tmp_path, capsys):
    run = _train(tmp_path / "run", levels)
    test = tmp_path / "test.txt"
    assert main(["generate", "tsp", "--count", "2", "--seed", "9000", "--out", str(test)]) == 0
    capsys.readouterr()
    assert main(["test", str(run), "--problems", str(test), "--checkpoint", "last"]) == 0
    assert f"testing {run} with its latest weights, after " in capsys.readouterr().out
    assert main(["test", str(run), "--problems", str(test)]) == 0
    assert "with its best weights (the validation pass that solved most" in capsys.readouterr().out
