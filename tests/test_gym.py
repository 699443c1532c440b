"""Gymnasium environments: the API checker, reference-trace replay, level sources, limits and errors."""

from __future__ import annotations

import importlib
import itertools
import re
import sys
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from sgps.cli import main
from sgps.domains import Tsp, get_domain, read_levels
from sgps.errors import ConfigError
from sgps.gym import ENV_IDS, SgpsEnv

from conftest import REPO
from traces import LEVEL_SETS, mismatches, parse_level, records

TRACE_CASES = [(domain, level_set) for domain, sets in LEVEL_SETS.items() for level_set in sets]


@pytest.mark.parametrize("env_id", ENV_IDS.values())
def test_every_environment_passes_the_gymnasium_checker(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker reports most problems as warnings
        env = gymnasium.make(env_id)
        check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize(("domain_name", "level_set"), TRACE_CASES)
@pytest.mark.parametrize("kind", ["walks", "solutions"])
def test_traces_replay_identically_through_gymnasium(shared, domain_name, level_set, kind):
    domain = get_domain(domain_name)
    replayed = 0
    traced = (record for record in records(shared / "reference", kind, level_set) if record.get("states"))
    for record in itertools.islice(traced, 2):
        start = parse_level(domain, record["level"])
        env = gymnasium.make(ENV_IDS[domain_name], level=start, max_steps=None)
        observation, _ = env.reset(seed=replayed)
        state, expected = start, record["states"]
        assert np.array_equal(observation, domain.observe([state])[0])
        for t, action in enumerate(record["actions"], start=1):
            observation, reward, terminated, truncated, info = env.step(action)
            state = domain.step(state, action)
            where = f"{level_set} level {record['level_index']} step {t}"
            assert env.unwrapped.state == state, where
            assert np.array_equal(observation, domain.observe([state])[0]), where
            assert not mismatches(domain, env.unwrapped.state, observation, expected[t]), where
            assert terminated == expected[t]["is_terminal"] and not truncated, where
            assert reward == float(expected[t]["is_solution"]) == float(info["solved"]), where
        replayed += 1
    assert replayed == 2


def test_the_readme_example_runs():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Gymnasium environments", 1)[1].split("\n## ", 1)[0]
    (snippet,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    namespace: dict = {}
    exec(snippet, namespace)
    assert namespace["observation"].shape == (8, 10, 10) and namespace["reward"] in (0.0, 1.0)
    assert namespace["env"].render().shape == (160, 160, 3)


def test_gymnasium_can_import_the_module_itself():
    env = gymnasium.make("sgps.gym:sgps/TSP-v0", level_seed=4)
    observation, _ = env.reset()
    assert np.array_equal(observation, get_domain("tsp").observe([get_domain("tsp").generate(4)])[0])


@pytest.fixture
def level_file(tmp_path):
    path = tmp_path / "tsp.txt"
    assert main(["generate", "tsp", "--count", "4", "--seed", "20", "--out", str(path)]) == 0
    return path


def test_level_sources(level_file):
    domain = get_domain("tsp")
    states = read_levels(level_file).states()
    fixed = SgpsEnv("tsp", level_file=level_file, level_index=2)
    assert all(fixed.reset(seed=s)[0].tobytes() == domain.observe([states[2]])[0].tobytes() for s in range(3))

    drawn = SgpsEnv("tsp", level_file=level_file)
    seen = set()
    for seed in range(12):
        drawn.reset(seed=seed)
        first = drawn.state
        drawn.reset(seed=seed)
        assert drawn.state == first  # a seed always picks the same level
        seen.add(states.index(first))
    assert len(seen) > 1

    seeded = SgpsEnv("tsp", variant="hard", level_seed=7)
    seeded.reset()
    assert seeded.state == domain.generate(7, **domain.variants["hard"])

    generated = SgpsEnv("tsp", params={"size": 12})
    assert generated.observation_space.shape == (8, 12, 12)
    generated.reset(seed=1)
    first = generated.state
    generated.reset(seed=1)
    assert generated.state == first
    generated.reset(seed=2)
    assert generated.state != first


def test_step_limit_truncates_and_reward_can_be_replaced():
    env = SgpsEnv("tsp", level_seed=5, max_steps=3, reward=lambda state, action, after: -1.0)
    env.reset()
    blocked = next(a for a in range(4) if env.domain.step(env.state, a) == env.state)
    outcomes = [env.step(blocked)[1:4] for _ in range(3)]
    assert outcomes == [(-1.0, False, False), (-1.0, False, False), (-1.0, False, True)]


def test_a_dead_end_terminates_without_reward():
    class Doomed(Tsp):
        def is_dead(self, state):
            return True

    env = SgpsEnv(Doomed(), level_seed=0)
    env.reset()
    _, reward, terminated, truncated, info = env.step(0)
    assert (reward, terminated, truncated, info) == (0.0, True, False, {"solved": False})


def test_render_modes():
    domain = get_domain("sokoban")
    pictures = SgpsEnv("sokoban", level_seed=1, render_mode="rgb_array", cell=4)
    pictures.reset()
    assert np.array_equal(pictures.render(), domain.render_image(domain.generate(1), 4))
    text = SgpsEnv("sokoban", level_seed=1, render_mode="ansi")
    text.reset()
    assert text.render() == domain.render_text(domain.generate(1)) + "\n"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"level_seed": 1, "level_file": "{file}"}, "choose one level source"),
        ({"variant": "hard", "level": "{state}"}, "choose one level source"),
        ({"level_index": 0}, "pass level_file too"),
        ({"level_file": "{file}", "level_index": 9}, "has 4 levels; level_index 9 is out of range"),
        ({"variant": "huge"}, "no generator variant 'huge'"),
        ({"render_mode": "human"}, "render_mode must be one of rgb_array, ansi"),
        ({"max_steps": 0}, "max_steps must be at least 1"),
        ({"cell": 100000}, "cell must be from 1 to 256"),
        ({"level_seed": -1}, "level_seed must be at least 0"),
    ],
)
def test_bad_options_are_reported(level_file, options, message):
    fill = {"{file}": level_file, "{state}": get_domain("tsp").generate(0)}
    options = {key: fill.get(value, value) if isinstance(value, str) else value for key, value in options.items()}
    with pytest.raises(ConfigError, match=re.escape(message)):
        SgpsEnv("tsp", **options)


def test_missing_gymnasium_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # what an absent package looks like to `import`
    monkeypatch.delitem(sys.modules, "sgps.gym")
    with pytest.raises(ImportError, match=re.escape("pip install 'sgps[gym]'")):
        importlib.import_module("sgps.gym")


@pytest.mark.parametrize(
    ("options", "name"),
    [({"max_steps": "10"}, "max_steps"), ({"max_steps": 2.5}, "max_steps"), ({"max_steps": True}, "max_steps"),
     ({"cell": 4.0}, "cell"), ({"level_seed": "3"}, "level_seed"), ({"params": "x"}, "params"),
     ({"level": get_domain("sokoban").generate(0)}, "level")],
)  # fmt: skip
def test_arguments_of_the_wrong_type_are_refused_naming_them(options, name):
    with pytest.raises(TypeError, match=f"^{name} must be"):
        SgpsEnv("tsp", **options)


def test_an_ended_episode_needs_a_reset_and_reset_checks_its_arguments():
    env = SgpsEnv("tsp", level_seed=5, max_steps=1)
    with pytest.raises(gymnasium.error.ResetNeeded, match="none was started"):
        env.step(0)  # before the first reset there is no episode
    env.reset()
    assert env.step(0)[3]  # truncated
    with pytest.raises(gymnasium.error.ResetNeeded, match="call reset"):
        env.step(0)
    env.reset()
    env.step(0)  # a new episode steps again
    with pytest.raises(TypeError, match="options must be a dict"):
        env.reset(options="x")
    with pytest.raises(TypeError, match="seed must be a whole number"):
        env.reset(seed=1.5)
    env.reset()
    with pytest.raises(ValueError, match="not in Discrete"):
        env.step(True)
