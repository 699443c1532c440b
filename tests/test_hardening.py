"""Bad configs, options and level files: each is one error line and exit status 2, before anything is written."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.domains.boulderdash import EMPTY as BOULDERDASH_EMPTY
from sgps.domains.boulderdash import EXIT_CLOSED, EXIT_OPEN
from sgps.domains.boxworld import EMPTY as BOXWORLD_EMPTY
from sgps.domains.boxworld import GEM
from sgps.errors import ConfigError
from sgps.runs.rundir import to_toml
from sgps.training.config import SECTIONS, resolve_config
from sgps.training.methods.hips.learner import HipsSettings
from sgps.training.schema import RULES


@pytest.fixture
def problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "train.txt"
    assert main(["generate", "tsp", "--count", "6", "--out", str(path)]) == 0
    capsys.readouterr()
    return path


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The single line a failed command wrote to stderr (no traceback, no usage)."""
    error = capsys.readouterr().err
    assert error.startswith("sgps: error: ") and error.count("\n") == 1, error
    return error


def train(problems: Path, out: Path, *options: str) -> int:
    return main(["train", "--problems", str(problems), "--out", str(out), "--preset", "tiny", "--quiet", *options])


# -- configs --------------------------------------------------------------------------------

BAD_CONFIGS = [
    ("network", "channels", "0"),
    ("network", "channels", "-4"),
    ("network", "channels", "1000000"),
    ("network", "blocks", "-1"),
    ("learner", "learning_rate", "-0.001"),
    ("learner", "learning_rate", "nan"),
    ("learner", "learning_rate", "inf"),
    ("learner", "weight_decay", "-1e-4"),
    ("learner", "epochs", "0"),
    ("learner", "epochs", "-2"),
    ("learner", "minibatch", "0"),
    ("learner", "minibatch", "-8"),
    ("bootstrap", "epsilon", "1.5"),
    ("bootstrap", "epsilon", "-0.1"),
    ("bootstrap", "seed", "-1"),
    ("bootstrap", "seed", "18446744073709551616"),
    ("bootstrap", "max_iterations", "-1"),
    ("bootstrap", "max_budget", "-1"),
    ("bootstrap", "max_budget", "100"),  # below the tiny preset's initial budget (500)
    ("bootstrap", "time_limit_minutes", "-5"),
    ("bootstrap", "time_limit_minutes", "nan"),
    ("bootstrap", "max_expansions", "-1"),
    ("bootstrap", "batch_size", "'many'"),
    ("run", "domain", "'chess'"),
    ("run", "validation_fraction", "1.5"),
    ("run", "validation_fraction", "-0.5"),
    ("run", "validation_fraction", "1.0"),
    ("run", "workers", "-1"),
    ("run", "evaluator", "'gpu'"),
    ("run", "evaluator", "true"),
    ("search", "evaluation_batch", "-1"),
    ("search", "evaluation_batch", "4097"),
    ("search", "evaluation_batch", "32.0"),
    ("search", "evaluation_batch", "'32'"),
    ("search", "precision", "'float16'"),
    ("search", "precision", "16"),
    ("subgoal", "hidden", "100000000"),
    ("subgoal", "cluster_level", "-1"),
    ("subgoal", "resolution", "-1.0"),
    ("subgoal", "blocks", "-1"),
    ("subgoal", "commitment", "-0.25"),
    ("subgoal", "conditioning", "'film'"),
    ("learner", "learning_rate", "1e308"),  # overflowed inside the optimiser
    ("learner", "learning_rate", "2.0"),
    ("learner", "weight_decay", "1e308"),
    ("subgoal", "commitment", "1e308"),  # inf in float32: a NaN loss
    ("subgoal", "code_objective", "'actions'"),
    ("subgoal", "action_weight", "-1.0"),
    ("subgoal", "action_weight", "nan"),
    ("subgoal", "action_weight", "'1.0'"),
    ("subgoal", "code_objective", "1"),
    ("subgoal", "reduce_activation", "'gelu'"),
]


@pytest.mark.parametrize(("section", "key", "value"), BAD_CONFIGS)
def test_a_bad_config_value_is_one_line_naming_the_key(tmp_path, problems, capsys, section, key, value):
    config = tmp_path / "bad.toml"
    config.write_text(f"[{section}]\n{key} = {value}\n")
    out = tmp_path / "run"
    assert train(problems, out, "--config", str(config)) == 2
    error = one_error_line(capsys)
    assert f"{config}: {section}.{key} must be " in error
    assert "got" in error
    assert not out.exists()


@pytest.mark.parametrize(
    ("options", "key"),
    [
        (["--seed", "-1"], "bootstrap.seed"),
        (["--max-iterations", "-1"], "bootstrap.max_iterations"),
        (["--time-limit", "-5"], "bootstrap.time_limit_minutes"),
        (["--time-limit", "nan"], "bootstrap.time_limit_minutes"),
        (["--cluster-level", "-1"], "subgoal.cluster_level"),
        (["--workers", "-3"], "run.workers"),
        (["--evaluation-batch", "-1"], "search.evaluation_batch"),
        (["--evaluation-batch", "100000"], "search.evaluation_batch"),
    ],
)
def test_bad_train_flags_follow_the_same_rules(tmp_path, problems, capsys, options, key):
    out = tmp_path / "run"
    assert train(problems, out, *options) == 2
    assert f"command line: {key} must be " in one_error_line(capsys)
    assert not out.exists()


@pytest.mark.parametrize(
    "data",
    [bytes(range(256)), "[run]\ndevice = 'cpu' # café\n".encode("latin-1"), "[run]\ndevice = 'cpu'\n".encode("utf-16")],
    ids=["binary", "latin-1", "utf-16"],
)
def test_a_config_that_is_not_utf8_is_one_error_line(tmp_path, problems, capsys, data):
    config = tmp_path / "bad.toml"
    config.write_bytes(data)
    assert train(problems, tmp_path / "run", "--config", str(config)) == 2
    assert f"{config}: not a UTF-8 text file" in one_error_line(capsys)
    assert not (tmp_path / "run").exists()


def test_run_domain_must_match_the_level_files(tmp_path, problems, capsys):
    config = tmp_path / "other.toml"
    config.write_text("[run]\ndomain = 'boxworld'\n")
    assert train(problems, tmp_path / "run", "--config", str(config)) == 2
    assert "domain tsp, but boxworld was asked for" in one_error_line(capsys)
    assert not (tmp_path / "run").exists()


def test_every_key_has_a_rule():
    for section, cls in {**SECTIONS, "hips": HipsSettings}.items():
        assert set(RULES[section]) == {field.name for field in dataclasses.fields(cls)}, section


@pytest.mark.parametrize(("flag", "value"), [("--workers", "1"), ("--seed", "3")])
def test_a_flag_does_not_hide_a_bad_value_in_the_config_file(tmp_path, problems, capsys, flag, value):
    config = tmp_path / "bad.toml"
    config.write_text("[run]\nworkers = -1\n[bootstrap]\nseed = -1\n")
    out = tmp_path / "run"
    assert train(problems, out, "--config", str(config), flag, value) == 2
    assert f"{config}: run.workers must be " in one_error_line(capsys)
    assert not out.exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("learning_rate = 1e308", "hips.learning_rate must be in (0, 1], got 1e+308"),
        ("epsilon = 1.0", "hips.epsilon must be in (0, 1), got 1.0"),
        ("channels = 2.5", "hips.channels must be an integer from 1 to 4,096, got 2.5"),
        ("discount = nan", "hips.discount must be in [0, 1], got nan"),
    ],
)
def test_hips_settings_follow_the_same_rules(tmp_path, problems, capsys, setting, message):
    config = tmp_path / "bad.toml"
    config.write_text(f"[hips]\n{setting}\n")
    out = tmp_path / "run"
    assert train(problems, out, "--algorithm", "hips-eps", "--config", str(config)) == 2
    assert f"{config}: {message}" in one_error_line(capsys)
    assert not out.exists()


def test_deprecated_spellings_still_load_with_a_warning():
    with pytest.warns(FutureWarning) as record:
        config = resolve_config("tiny", overrides={"subgoal": {"conditioning": "code", "hierarchy": "paper"}})
    assert {str(warning.message).split(" is ")[0] for warning in record} == {
        "subgoal.conditioning = 'code'", "subgoal.hierarchy = 'paper'"
    }
    assert (config.subgoal.conditioning, config.subgoal.hierarchy) == ("code-vector", "louvain")


def test_max_budget_may_equal_the_initial_budget_or_be_zero():
    assert resolve_config("tiny", overrides={"bootstrap": {"max_budget": 500}}).bootstrap.max_budget == 500
    assert resolve_config("tiny", overrides={"bootstrap": {"max_budget": 0}}).bootstrap.max_budget == 0


VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["code", "state", "paper", "lazy", "lts-cm", "tsp", "cuda", "improved-levin", "bfloat16", "tf32",
                     "shared", "per-process"]),
    st.lists(st.integers(), max_size=3),
    st.none(),
)
KEYS = st.sampled_from([(section, key) for section, keys in RULES.items() for key in keys] + [("run", "colour")])


@pytest.mark.filterwarnings("ignore::FutureWarning")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=4))
def test_random_mutations_load_or_fail_with_a_config_error(changes: list[tuple[tuple[str, str], Any]]):
    overrides: dict[str, dict[str, Any]] = {}
    for (section, key), value in changes:
        overrides.setdefault(section, {})[key] = value
    try:
        config = resolve_config("tiny", overrides=overrides)
    except ConfigError as error:
        assert "\n" not in str(error)
        return
    assert config.network.channels >= 1 and math.isfinite(config.learner.learning_rate)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_random_config_files_load_or_fail_with_a_config_error(tmp_path_factory, data: bytes):
    config = tmp_path_factory.mktemp("config") / "random.toml"
    config.write_bytes(data)
    with contextlib.suppress(ConfigError):
        resolve_config("tiny", config)


# -- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--count", "0", "--no-train"], "--count must be from 1 to 1,000,000, got 0"),
        (["generate", "tsp", "--count", "0"], "--count must be from 1 to 1,000,000, got 0"),
        (["generate", "tsp", "--count", "100000000"], "--count must be from 1 to 1,000,000, got 100000000"),
        (["generate", "tsp", "--seed", "-1"], "--seed must be at least 0, got -1"),
    ],
)
def test_bad_counts_are_refused_before_anything_is_written(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out)]) == 2
    assert message in one_error_line(capsys)
    assert not out.exists()


def test_show_caps_the_picture_size(tmp_path, problems, capsys):
    png = tmp_path / "level.png"
    assert main(["show", str(problems), "--png", str(png), "--cell", "100000"]) == 2
    assert "--cell must be from 1 to 256, got 100000" in one_error_line(capsys)
    large = tmp_path / "large.txt"
    domain = get_domain("tsp")
    write_levels(large, domain, [domain.generate(0, size=255, cities=2)])
    assert main(["show", str(large), "--png", str(png), "--cell", "64"]) == 2
    assert "more than 67,108,864 pixels; use --cell 32 or less" in one_error_line(capsys)
    assert not png.exists()


@pytest.mark.parametrize("weight", ["nan", "inf", "-1"])
def test_solve_refuses_a_weight_that_is_not_a_finite_non_negative_number(problems, capsys, weight):
    assert main(["solve", str(problems), "--algorithm", "wastar", f"--weight={weight}"]) == 2
    assert "--weight must be a finite number >= 0" in one_error_line(capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--problems", "x", "--out", "y", "--algorithm", "dfs"],
        ["train", "--problems", "x", "--out", "y", "--preset", "huge"],
        ["train", "--problems", "x", "--out", "y", "--device", "tpu"],
        ["train", "--problems", "x", "--out", "y", "--evaluator", "gpu"],
        ["train", "--problems", "x", "--out", "y", "--precision", "float16"],
        ["train", "--problems", "x", "--out", "y", "--evaluation-batch", "3.5"],
    ],
)
def test_invalid_choices_end_with_one_error_line(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("usage: ") and lines[-1].startswith("sgps train: error: argument --")


# -- level files ----------------------------------------------------------------------------


def test_the_solver_stops_at_its_state_cap_on_a_huge_level(tmp_path, capsys):
    level = tmp_path / "huge.txt"
    domain = get_domain("tsp")
    write_levels(level, domain, [domain.generate(0, size=255, cities=2)])
    assert main(["solve", str(level), "--max-states", "200"]) == 1
    assert "state cap reached (200 states; raise it with --max-states)" in capsys.readouterr().out


def test_the_default_state_cap_fits_large_levels_in_memory():
    from sgps.domains.solver import MAX_STATES, default_state_cap

    domain = get_domain("tsp")
    assert default_state_cap(domain, domain.generate(0)) == MAX_STATES
    assert default_state_cap(domain, domain.generate(0, size=255, cities=2)) < 20_000


@pytest.mark.parametrize("command", ["show", "solve", "test"])
def test_a_fifo_is_refused_not_read(tmp_path, capsys, command):
    fifo = tmp_path / "levels.txt"
    os.mkfifo(fifo)
    complete = resolve_config("tiny", overrides={"run": {"domain": "tsp"}}).as_dict()
    (tmp_path / "config.toml").write_text(to_toml(complete))  # `test` reads the run's config first
    argv = {"show": ["show", str(fifo)], "solve": ["solve", str(fifo)],
            "test": ["test", str(tmp_path), "--problems", str(fifo)]}[command]  # fmt: skip
    status: list[int] = []
    worker = threading.Thread(target=lambda: status.append(main(argv)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # unblock the reader so the thread can end, then fail
        with open(fifo, "w"):
            pass
        pytest.fail(f"sgps {command} blocked reading a FIFO")
    assert status == [2]
    assert f"{fifo}: not a regular file or folder" in one_error_line(capsys)


def _level_line(domain_name: str, seed: int = 0) -> tuple[Any, list[str]]:
    domain = get_domain(domain_name)
    fields = domain.encode(domain.generate(seed))
    return domain, [str(value) for value in fields]


@pytest.mark.parametrize(
    ("domain_name", "codes", "empty", "message"),
    [
        ("boxworld", (GEM,), BOXWORLD_EMPTY, "has no goal gem"),
        ("boulderdash", (EXIT_CLOSED, EXIT_OPEN), BOULDERDASH_EMPTY, "has no exit"),
    ],
)
def test_unsolvable_levels_are_refused_at_load(tmp_path, capsys, domain_name, codes, empty, message):
    domain, fields = _level_line(domain_name)
    head = len(domain.header_fields)
    cells = [str(empty) if int(value) in codes else value for value in fields[head:]]
    level = tmp_path / "level.txt"
    level.write_text(f"; sgps domain={domain_name} count=1 params={{}}\n" + "|".join([*fields[:head], *cells]) + "\n")
    assert main(["show", str(level)]) == 2
    assert f"{level}:2: " in (error := one_error_line(capsys)) and message in error


@pytest.mark.parametrize("digits", ["1_0", "１０", "١٠", "+10", " 1 0"])
def test_level_integers_are_ascii_digits_only(tmp_path, capsys, digits):
    _, fields = _level_line("tsp")
    level = tmp_path / "level.txt"
    level.write_text("; sgps domain=tsp count=1 params={}\n" + "|".join([digits, *fields[1:]]) + "\n")
    assert main(["show", str(level)]) == 2
    assert f"{level}:2: field 1" in one_error_line(capsys)


@pytest.mark.parametrize("position", [1, 7])
def test_a_level_field_of_thousands_of_digits_is_one_error_line(tmp_path, capsys, position):
    _, fields = _level_line("tsp")
    fields[position - 1] = "7" * 4400  # beyond Python's 4,300-digit int() limit
    level = tmp_path / "level.txt"
    level.write_text("; sgps domain=tsp count=1 params={}\n" + "|".join(fields) + "\n")
    assert main(["show", str(level)]) == 2
    assert f"{level}:2: field {position} has 4,400 digits; a level field has at most 19" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tsp", "--param", "size=20000"], "size must be between 2 and 255, not 20000"),  # hung
        (["boxworld", "--param", "size=100000"], "size must be between 3 and 255, not 100000"),  # out of memory
        (["craftworld", "--param", "size=256"], "size must be between 5 and 255, not 256"),
        (["sokoban", "--param", "size=3"], "size must be between 4 and 255, not 3"),
        (["sokoban", "--param", "walk_steps=1000000000"], "walk_steps must be between 0 and 10 x size x size"),
        (["sokoban", "--param", "turn_probability=nan"], "turn_probability is a probability between 0 and 1, not nan"),
        (["sokoban", "--param", "tries=0"], "tries must be between 1 and 1,000, not 0"),
        (["boulderdash", "--param", "dirt=nan"], "dirt is a probability between 0 and 1, not nan"),
        (["boxworld", "--param", "distractors=10000000"], "30000004 boxes, an agent and a key do not fit"),  # minutes
    ],
)
def test_generator_parameters_are_bounded_before_anything_is_built(tmp_path, capsys, argv, message):
    out = tmp_path / "levels.txt"
    assert main(["generate", *argv, "--out", str(out)]) == 2
    assert message in one_error_line(capsys)
    assert not out.exists()


def test_a_level_set_of_mixed_sizes_is_refused_before_a_run_is_made(tmp_path, problems, capsys):
    large = tmp_path / "large.txt"
    assert main(["generate", "tsp", "--variant", "large", "--count", "2", "--out", str(large)]) == 0
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(problems.read_text() + "".join(large.read_text().splitlines(keepends=True)[1:]))
    capsys.readouterr()
    out = tmp_path / "run"
    size_message = "a level of another size (observation 8x16x16, the others' 8x10x10)"
    assert train(mixed, out) == 2
    assert f"{mixed}:8: {size_message}" in one_error_line(capsys)  # a header line and 6 levels before it
    assert train(problems, out, "--validation", str(large)) == 2
    assert f"{large}:2: {size_message}" in one_error_line(capsys)
    assert not out.exists()
    assert train(problems, out, "--max-batches", "1") == 0
    capsys.readouterr()
    assert main(["test", str(out), "--problems", str(mixed), "--budget", "10"]) == 2
    assert f"{mixed}:8: {size_message}" in one_error_line(capsys)


def test_outputs_are_written_to_regular_files_only(tmp_path, capsys):
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    assert main(["generate", "tsp", "--count", "1", "--out", str(fifo)]) == 2
    assert f"{fifo}: a FIFO (named pipe), not a regular file" in one_error_line(capsys)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still the FIFO, not replaced by a file
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    assert main(["generate", "tsp", "--count", "1", "--out", str(link)]) == 0
    capsys.readouterr()
    assert link.is_symlink() and "sgps domain=tsp" in real.read_text()  # the link is followed, not replaced
    device = tmp_path / "null-link.txt"
    device.symlink_to("/dev/null")
    assert main(["generate", "tsp", "--count", "1", "--out", str(device)]) == 2
    assert "a device, not a regular file" in one_error_line(capsys)
    assert Path("/dev/null").is_char_device()
