"""Check before making anything, and name what the user gave (issue 72).

Each case failed before its change: a fork of a run whose config.toml no longer matched its
checkpoint was made and could not resume; another run's checkpoint copied into a run folder
was packed, forked or resumed as the run's own (or named the wrong problem); `sgps compare`
made its folder before it found a network too large for the machine; `sgps.load` took a file
without weights and failed at the first search; an edited level count in a comparison archive
generated a million levels before its digests were checked; a missing or extra --validation
was blamed on --problems; the Python API refused numpy integers.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import sgps
from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.errors import CheckpointError, ConfigError
from sgps.experiments.plan import read_plan
from sgps.experiments.problems import pending_problems, problem_files, record_problem_digests, write_problems
from sgps.experiments.tomlfile import dumps
from sgps.runs.archive import Member, read_members, write_archive


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("sgps: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes: what a refused command must leave as it was."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def levels(path: Path, variant: str, seed: int, count: int) -> Path:
    domain = get_domain("tsp")
    write_levels(path, domain, [domain.generate(seed + k, **domain.variants[variant]) for k in range(count)])
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny TSP runs and their level files: `base`, stopped by its expansion limit after one batch (a
    fork goes on from it); `further`, the same run trained two passes; `other`, a run of other levels
    that solved them all; `validated`, trained with a validation file."""
    folder = tmp_path_factory.mktemp("runs")
    paths = {"hard": levels(folder / "hard.txt", "hard", 0, 10), "easy": levels(folder / "easy.txt", "standard", 0, 10),
             "validation": levels(folder / "validation.txt", "hard", 500, 3)}  # fmt: skip
    starts = {"base": ["--problems", paths["hard"], "--max-expansions", "500"],
              "further": ["--problems", paths["hard"], "--max-expansions", "9000"],
              "other": ["--problems", paths["easy"], "--max-iterations", "1"],
              "validated": ["--problems", paths["hard"], "--validation", paths["validation"],
                            "--max-expansions", "500"]}  # fmt: skip
    for name, options in starts.items():
        argv = ["train", *map(str, options), "--out", str(folder / name), "--preset", "tiny", "--quiet",
                "--device", "cpu"]  # fmt: skip
        assert main(argv) == 0, name
        paths[name] = folder / name
    return paths


@pytest.fixture
def copy(runs: dict[str, Path], tmp_path: Path):
    """A copy of one of the `runs` in the test's folder, to damage."""

    def make(name: str) -> Path:
        return Path(shutil.copytree(runs[name], tmp_path / f"copy-of-{name}"))

    return make


def refused_leaving_all(argv: list[str], folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run `argv`, which must be refused in one line and leave `folder` exactly as it was; the line."""
    before = snapshot(folder)
    capsys.readouterr()
    assert main(argv) == 2, argv
    line = one_error(capsys)
    assert snapshot(folder) == before, argv
    return line


def command(kind: str, run: Path, problems: Path, out: Path, *extra: str) -> list[str]:
    """`sgps pack`, `fork` or resume (`train --resume`) of `run`, trained on `problems`, into `out`."""
    if kind == "pack":
        return ["pack", str(run), "--out", str(out), "--problems", str(problems), *extra]
    if kind == "fork":
        return ["fork", str(run), "--out", str(out), "--problems", str(problems), "--max-expansions", "20000", *extra]
    return ["train", "--problems", str(problems), "--out", str(run), "--resume", "--quiet", "--max-expansions",
            "20000", *extra]  # fmt: skip


# 1. A config.toml that no longer matches its checkpoint --------------------------------------------


@pytest.mark.parametrize("kind", ["fork", "pack"])
def test_a_run_whose_config_no_longer_matches_its_checkpoint_is_refused(runs, copy, tmp_path, capsys, kind) -> None:
    """The fork was made, and could not resume ("config.toml: changed since the run started")."""
    run = copy("base")
    config = run / "config.toml"
    config.write_text(re.sub(r"(?m)^channels = 16$", "channels = 8", config.read_text(), count=1))
    line = refused_leaving_all(command(kind, run, runs["hard"], tmp_path / "new"), tmp_path, capsys)
    assert f"{config}: does not match the run's checkpoint {run / 'checkpoints' / 'trainer.pt'}" in line
    assert "network.channels (16 in the checkpoint, 8 in config.toml)" in line
    assert not (tmp_path / "new").exists()


# 2. Another run's checkpoint --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pack", "fork", "resume"])
@pytest.mark.parametrize("foreign", ["further", "other"])
def test_another_runs_checkpoint_is_refused(runs, copy, tmp_path, capsys, kind, foreign) -> None:
    """`further` (the same settings and problems, two passes on) was packed with its progress, and its fork
    lost rows; `other` (other levels, finished) was "finished by its every training problem solved" to
    a fork and "not the train problems" to pack and resume, though the problems were the run's."""
    run = copy("base")
    shutil.copy2(runs[foreign] / "checkpoints" / "trainer.pt", run / "checkpoints" / "trainer.pt")
    line = refused_leaving_all(command(kind, run, runs["hard"], tmp_path / "new"), tmp_path, capsys)
    assert "another run's" in line and str(run) in line, line
    assert not (tmp_path / "new").exists()


def test_the_run_itself_still_packs_forks_and_resumes(runs, copy, tmp_path, capsys) -> None:
    run = copy("base")
    for kind in ("pack", "fork"):
        assert main(command(kind, run, runs["hard"], tmp_path / kind)) == 0, capsys.readouterr().err
    assert main(command("resume", run, runs["hard"], tmp_path / "unused", "--max-batches", "1")) == 0


# 3. A network too large for the machine, refused before the comparison's folder is made ----------------

COMPARISON = """
[compare]
domain = "tsp"
algorithms = ["ALGORITHM"]
seeds = [0]
preset = "tiny"

[problems.train]
variant = "standard"
seed = 0
count = 12
validation = 2

[tests.test]
variant = "standard"
seed = 9000
count = 2
budget = 500
"""


@pytest.mark.parametrize(("algorithm", "table"), [("phs", "train.network"), ("hips-eps", "hips")])
def test_compare_estimates_memory_before_making_its_folder(tmp_path, capsys, algorithm, table) -> None:
    """The folder was made, the run failed in it, and the corrected config was refused as "changed"."""
    config = tmp_path / "big.toml"
    config.write_text(COMPARISON.replace("ALGORITHM", algorithm) + f"\n[{table}]\nchannels = 4096\nblocks = 64\n")
    line = refused_leaving_all(["compare", str(config), "--out", str(tmp_path / "cmp"), "--jobs", "1"], tmp_path,
                               capsys)  # fmt: skip
    assert f"{config}: the run {algorithm}-s0: this run needs about" in line and "memory" in line, line
    assert f"{table.removeprefix('train.')}.channels = 4096" in line
    assert not (tmp_path / "cmp").exists()  # so the corrected config starts it afresh


# 4. sgps.load of a file without weights -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["hard.txt", "trainer.pt"])
def test_load_refuses_a_file_without_weights_at_once(runs, name) -> None:
    """It was taken, and the first `solve` failed ("header too large")."""
    file = runs["hard"] if name == "hard.txt" else runs["base"] / "checkpoints" / "trainer.pt"
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(file))}: not a readable sgps checkpoint .*checkpoint"):
        sgps.load(runs["base"], checkpoint=str(file))


# 5. An edited level count in a comparison archive -------------------------------------------------------


@pytest.fixture
def comparison(tmp_path: Path) -> Path:
    """A comparison folder as `sgps compare` starts one (its compare.toml, problem sets and their digests)."""
    config = tmp_path / "compare.toml"
    config.write_text(COMPARISON.replace("ALGORITHM", "phs"))
    plan, folder = read_plan(config), tmp_path / "cmp"
    folder.mkdir()
    (folder / "compare.toml").write_text(dumps(plan.resolved))
    files = problem_files(plan, folder)
    write_problems(plan.domain, pending_problems(plan, files, str(config)))
    record_problem_digests(files)
    return folder


RAISED = ("count = 12\n", "count = 1000000\n")


def test_unpack_checks_the_level_counts_before_generating(comparison, tmp_path, capsys) -> None:
    """The archive's edited compare.toml made `sgps unpack` generate a million levels (a hang) before it
    compared the digests."""
    archive, edited = tmp_path / "A", tmp_path / "edited"
    assert main(["pack", str(comparison), "--out", str(archive)]) == 0
    index, members = read_members(archive)
    changed = [Member(m.path, m.data.replace(*(s.encode() for s in RAISED)) if m.path == "compare.toml" else m.data)
               for m in members]  # fmt: skip
    write_archive(edited, index.kind, index.about, changed)  # every digest matches its edited member
    line = refused_leaving_all(["unpack", str(edited), "--out", str(tmp_path / "new")], tmp_path, capsys)
    assert f"{edited}: its compare.toml asks for 1,000,000 levels of train.txt, but the comparison packed 12" in line
    assert not (tmp_path / "new").exists()


def test_pack_refuses_a_comparison_whose_level_count_was_edited(comparison, tmp_path, capsys) -> None:
    """It was packed, and its archive then unpacked as above."""
    plan = comparison / "compare.toml"
    plan.write_text(plan.read_text().replace(*RAISED))
    line = refused_leaving_all(["pack", str(comparison), "--out", str(tmp_path / "A")], tmp_path, capsys)
    file = comparison / "problems" / "train.txt"
    assert f"{plan}: asks for 1,000,000 levels of train.txt, but {file} holds 12, the levels its runs searched" in line


# 6. The validation file, named as such ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pack", "fork"])
def test_a_missing_or_extra_validation_file_is_named(runs, tmp_path, capsys, kind) -> None:
    """Both were "hard.txt: not the train problems RUN was trained on"."""
    line = refused_leaving_all(command(kind, runs["validated"], runs["hard"], tmp_path / "new"), tmp_path, capsys)
    assert f"--validation: {runs['validated']} was trained with a validation file" in line, line
    extra = ["--validation", str(runs["validation"])]
    line = refused_leaving_all(command(kind, runs["base"], runs["hard"], tmp_path / "new", *extra), tmp_path, capsys)
    assert f"--validation {runs['validation']}: {runs['base']} had no validation file" in line
    assert "drop --validation" in line and not (tmp_path / "new").exists()


# 7. Numpy integers in the Python API --------------------------------------------------------------------


def test_the_api_takes_any_integral_number(runs, tmp_path) -> None:
    """`sgps.train` refused threads=np.int64(1) (a TypeError) and seed=np.int64(0) ("must be an integer"),
    `sgps.fork` initial_budget=np.int64(700)."""
    trained = sgps.train(runs["hard"], tmp_path / "run", preset="tiny", quiet=True, device="cpu", seed=np.int64(0),
                         workers=np.int64(1), max_expansions=np.int64(500), threads=np.int32(1),
                         max_batches=np.uint8(1))  # fmt: skip
    assert trained.expansions == 4500  # one batch of 9 searches at the tiny preset's budget of 500
    fork = sgps.fork(runs["base"], tmp_path / "fork", problems=runs["hard"], initial_budget=np.int64(700),
                     max_expansions=np.uint32(9000), checkpoint_every=np.int16(2),
                     time_limit=np.float32(3))  # fmt: skip
    assert fork.budget == 700 and "bootstrap.checkpoint_every 10 -> 2" in fork.changes
    searcher = sgps.load(runs["base"])
    assert searcher.solve(runs["hard"], index=np.int64(1), budget=np.int64(50)).expansions == 50
    assert searcher.solve(runs["hard"], budget=np.int64(50), epsilon=np.float32(0.5)).expansions == 50
    assert [outcome.expansions for outcome in searcher.solve_many(runs["hard"], budget=np.int32(20))] == [20] * 10


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda run, out, levels: sgps.fork(run, out, problems=levels, initial_budget=1.5), TypeError,
         "^initial_budget must be a whole number, not float 1.5"),
        (lambda run, out, levels: sgps.fork(run, out, problems=levels, max_expansions=np.bool_(True)), TypeError,
         "^max_expansions must be a whole number"),
        (lambda run, out, levels: sgps.fork(run, out, problems=levels, time_limit="3"), TypeError, "^time_limit"),
        (lambda run, out, levels: sgps.train(levels, out, preset="tiny", threads=1.5), TypeError,
         "^threads must be a int, not float"),
        (lambda run, out, levels: sgps.train(levels, out, preset="tiny", seed=2.5), ConfigError, r"given as seed="),
        (lambda run, out, levels: sgps.load(run).solve(levels, budget=np.float64(5)), TypeError, "^budget"),
    ],
)  # fmt: skip
def test_the_api_refuses_other_numbers_naming_the_argument(runs, tmp_path, call, error, message) -> None:
    with pytest.raises(error, match=message):
        call(runs["base"], tmp_path / "new", runs["hard"])
    assert not (tmp_path / "new").exists()
