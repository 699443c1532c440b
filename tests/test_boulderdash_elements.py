"""BoulderDash beyond the paper's levels: level files with every code and parameter, generators, the
command line, pictures, and the soundness of `may_reach` and the exact solver with the new elements.

The rules themselves are checked step by step against the official simulator in
tests/test_boulderdash_official.py; these tests check what is built on them.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from sgps.cli import main
from sgps.domains import boulderdash as bd
from sgps.domains import get_domain, read_levels, solve
from sgps.domains.animation import trajectory
from sgps.domains.boulderdash.drawing import SPRITE_OF_CODE, TEXT
from sgps.domains.levels import format_level
from sgps.errors import LevelFormatError

from helpers import run
from official_traces import level_fields, replay, trace_records

#: A 9x9 steel-bordered level: its 7x7 inside holds every code but the steel wall and agent in exit,
#: with the agent (code 0) at the top left, and the agent in exit replaced by an agent.
_INSIDE = [0, *(code for code in range(1, bd.NUM_CODES) if code not in (9, bd.STEEL_WALL))]


def every_code_level() -> list[int]:
    rows = cols = 9
    inside = iter(_INSIDE)
    cells = [
        bd.STEEL_WALL if r in (0, rows - 1) or c in (0, cols - 1) else next(inside, bd.EMPTY)
        for r in range(rows)
        for c in range(cols)
    ]
    return [rows, cols, 1, *cells]


def test_a_level_file_with_every_code_loads_and_draws(tmp_path):
    fields = every_code_level()
    fields[-1] = 9  # the agent in exit too: a level may hold it (the official parser accepts it)
    fields[3 + 10] = bd.EMPTY  # ... then it is the only agent
    path = tmp_path / "all.txt"
    path.write_text("; sgps domain=boulderdash\n" + "|".join(map(str, fields)) + "\n")
    state = read_levels(path).levels[0].state
    assert isinstance(state, bd.DynamicState)
    assert set(state.grid) == set(range(bd.NUM_CODES)) - {bd.AGENT}
    domain = get_domain("boulderdash")
    assert domain.is_goal(state)
    text = domain.render_text(state)
    assert "stone" in text and "firefly" in text
    image = domain.render_image(state, cell=4)
    assert image.shape == (36, 36, 3)
    assert set(TEXT) == set(SPRITE_OF_CODE) == set(range(bd.NUM_CODES))


def test_the_example_file_holds_every_code(capsys):
    example = Path(__file__).parent.parent / "examples" / "boulderdash_every_element.txt"
    playable, finished = read_levels(example).states()
    assert set(playable.grid) | set(finished.grid) == set(range(bd.NUM_CODES))
    assert bd.rules_of(playable).gravity and get_domain("boulderdash").is_goal(finished)
    assert main(["show", str(example), "--index", "0"]) == 0
    assert "gravity on" in capsys.readouterr().out


def test_every_code_level_plays_and_observes_one_channel_per_cell():
    domain = get_domain("boulderdash")
    state = domain.parse(every_code_level())
    for action in [1, 2, 3, 0] * 5:
        state = domain.step(state, action)
    observation = domain.observe([state])[0]
    assert observation.shape == (bd.NUM_CHANNELS, 9, 9)
    assert (observation.sum(axis=0) == 1).all()


def test_parameters_travel_as_trailing_fields_and_round_trip():
    domain = get_domain("boulderdash")
    fields = [*every_code_level(), 1, 7, 200, 30000, 1, 2, 2, 99]
    state = domain.parse(fields)
    rules = bd.rules_of(state)
    assert rules == bd.Rules(1, True, 7, 200, 0.03, True, 2, 2, 99)
    assert domain.encode(state) == fields
    assert domain.parse([int(f) for f in format_level(domain, state).split("|")]) == state
    # the default parameters write the official format
    assert len(domain.encode(domain.parse(every_code_level()))) == 3 + 81


@pytest.mark.parametrize(
    ("trailing", "message"),
    [
        ([2, 140, 20, 160000, 0, 1, 1, 0], "gravity is 2"),
        ([0, -1, 20, 160000, 0, 1, 1, 0], "magic_wall_steps is -1"),
        ([0, 140, 20, 2_000_000, 0, 1, 1, 0], "blob_max_percentage_millionths is 2000000"),
        ([0, 140, 20, 160000, 0, 3, 1, 0], "butterfly_explosion_ver is 3"),
        ([0, 140, 20, 160000, 0, 1, 0, 0], "butterfly_move_ver is 0"),
        ([0, 140, 20, 160000], "4 fields follow the 81 cells of a 9x9 level; only the 8 parameter fields may"),
    ],
)
def test_bad_parameter_fields_are_named(tmp_path, trailing, message):
    path = tmp_path / "bad.txt"
    path.write_text("; sgps domain=boulderdash\n" + "|".join(map(str, every_code_level() + trailing)) + "\n")
    with pytest.raises(LevelFormatError) as caught:
        read_levels(path)
    assert message in str(caught.value) and "bad.txt:2:" in str(caught.value)


GRAVITY_ON = [1, 140, 20, 160000, 0, 1, 1, 0]


#: One-row levels (agent, ..., exit) and whether a level needing that many diamonds is accepted.
GEMS_REQUIRED_CASES = [
    ([0, 5, 7], 1, True),
    ([0, 5, 7], 2, False),  # the paper's codes: one diamond and nothing makes more
    ([0, 5, 3, 7], 2, False),  # a stone makes no diamond either
    ([0, 5, 3, 20, 7], 2, True),  # ... unless a magic wall turns it into one
    ([0, 5, 3, 20, 7], 3, False),
    ([0, 5, 14, 7], 9, True),  # butterflies explode into diamonds
    ([0, 5, 23, 7], 9, True),  # enclosed blobs turn into diamonds
    ([0, 5, 24, 7], 9, True),  # an explosion to diamond
    ([0, 5, 39, 7], 9, True),  # a falling stone cracks a nut into a diamond
    ([0, 5, 8], 9, True),  # the open exit needs no diamonds
    ([9, 5, 7], 9, True),  # the agent starts in the exit: solved already
    ([0, 5, 14, 7], 2**31 - 1, True),  # the largest count (the official field is a C++ int)
]


@pytest.mark.parametrize(("cells", "required", "accepted"), GEMS_REQUIRED_CASES)
@pytest.mark.parametrize("parameters", [[], GRAVITY_ON], ids=["defaults", "gravity"])
def test_gems_required_refuses_only_the_levels_that_can_never_be_solved(cells, required, accepted, parameters):
    """A level is refused when it needs more diamonds than it could ever hold and its exit is closed."""
    domain = get_domain("boulderdash")
    fields = [1, len(cells), required, *cells, *parameters]
    if accepted:
        state = domain.parse(fields)
        assert bd.rules_of(state).gems_required == required and domain.encode(state) == fields
    else:
        with pytest.raises(LevelFormatError, match=rf"gems_required is {required} but the level holds at most \d"):
            domain.parse(fields)


@pytest.mark.parametrize("required", [-1, 2**31, 2**63 - 1])
def test_gems_required_outside_its_range_is_named(required):
    with pytest.raises(LevelFormatError, match=rf"gems_required is {required}; it must be between 0 and 2147483647"):
        get_domain("boulderdash").parse([1, 3, required, 0, 14, 7])


def test_level_fields_are_plain_decimal_integers(tmp_path):
    """The official loader (std::stoi) also reads '+1'; sgps refuses it, so that a level means one thing."""
    path = tmp_path / "plus.txt"
    path.write_text("; sgps domain=boulderdash\n1|3|+1|0|5|7\n")
    with pytest.raises(LevelFormatError, match="field 3 \\('\\+1'\\) is not an integer in ASCII digits"):
        read_levels(path)


def test_paper_levels_keep_their_fast_states_and_gravity_keeps_their_layout():
    domain = get_domain("boulderdash")
    for seed in range(50001, 50011):
        paper = domain.generate(seed)
        assert type(paper) is bd.BoulderDashState
        assert len(domain.encode(paper)) == 3 + 14 * 14
        gravity = domain.generate(seed, gravity=True)
        assert isinstance(gravity, bd.DynamicState) and gravity.grid == paper.grid
        assert domain.encode(gravity)[: 3 + 14 * 14] == domain.encode(paper)
        crowded = domain.generate(seed, stones=5, fireflies=1, butterflies=1)
        changed = [i for i, (a, b) in enumerate(zip(paper.grid, crowded.grid, strict=True)) if a != b]
        assert len(changed) == 7 and all(paper.grid[i] in (bd.EMPTY, bd.DIRT) for i in changed)
        assert sorted(crowded.grid[i] for i in changed)[:5] == [bd.STONE] * 5


def test_cli_generates_shows_solves_and_builds_a_dataset_with_gravity(tmp_path, capsys):
    levels, dataset = tmp_path / "g.txt", tmp_path / "g.npz"
    params = ["--param", "gravity=true", "--param", "stones=4", "--param", "butterflies=1", "--param", "dirt=0"]
    assert main(["generate", "boulderdash", "--count", "2", "--seed", "3", *params, "--out", str(levels)]) == 0
    loaded = read_levels(levels)
    assert all(isinstance(level.state, bd.DynamicState) and bd.rules_of(level.state).gravity for level in loaded.levels)
    assert main(["show", str(levels), "--index", "1"]) == 0
    assert "gravity on" in capsys.readouterr().out
    assert main(["solve", str(levels), "--index", "0"]) == 0
    assert "optimal length" in capsys.readouterr().out
    assert main(["dataset", "boulderdash", "--problems", str(levels), "--out", str(dataset), "--workers", "1"]) == 0


def test_exact_solutions_of_levels_with_stones_and_creatures_replay_to_the_goal():
    domain = get_domain("boulderdash")
    for seed in range(3):
        start = domain.generate(seed, gravity=True, stones=4, fireflies=1, dirt=0.0)
        result = solve(domain, start, method="bfs")
        assert result.length is not None
        end = run(domain, start, list(result.actions))
        assert domain.is_goal(end)


def test_the_fast_path_and_the_official_scan_play_the_paper_elements_alike():
    """A paper-style level with a non-default random seed (which nothing there draws) goes through the scan."""
    domain = get_domain("boulderdash")
    rng = random.Random(3)
    for seed in range(50001, 50013):
        fields = domain.encode(domain.generate(seed))
        for index in rng.sample([i for i, code in enumerate(fields[3:], start=3) if code == bd.EMPTY], 3):
            fields[index] = bd.DIAMOND_FALLING
        fast, scanned = domain.parse(fields), domain.parse([*fields, 0, 140, 20, 160000, 0, 1, 1, 1])
        assert type(fast) is bd.BoulderDashState and type(scanned) is bd.DynamicState
        for _ in range(150):
            action = rng.randrange(4)
            fast, scanned = domain.step(fast, action), domain.step(scanned, action)
            assert (fast.grid, fast.agent, fast.gems) == (scanned.grid, scanned.agent, scanned.gems)
            assert domain.is_dead(fast) == domain.is_dead(scanned) and domain.is_goal(fast) == domain.is_goal(scanned)


def test_a_pushed_stone_falls_with_gravity_off():
    domain = get_domain("boulderdash")
    rows = [
        [19, 19, 19, 19, 19],
        [19, 0, 3, 1, 19],
        [19, 2, 2, 1, 19],
        [19, 7, 2, 1, 19],
        [19, 19, 19, 19, 19],
    ]
    state = domain.parse([5, 5, 0, *(code for row in rows for code in row)])
    state = domain.step(state, 1)  # pushed over the gap, the stone becomes a falling stone
    assert (state.agent, state.grid[8]) == (7, bd.STONE + 1)
    state = domain.step(state, 0)  # the agent bumps into steel; the falling stone falls (no gravity check)
    assert (state.grid[8], state.grid[13]) == (bd.EMPTY, bd.STONE + 1)
    state = domain.step(domain.step(state, 0), 0)  # it reaches the floor and rests
    assert state.grid[18] == bd.STONE


def test_a_falling_stone_kills_and_death_is_terminal():
    domain = get_domain("boulderdash")
    state = domain.parse([6, 3, 0, 19, 19, 19, 19, 4, 19, 19, 1, 19, 19, 0, 19, 19, 7, 19, 19, 19, 19])
    state = domain.step(state, 0)  # the agent walks under the falling stone
    assert domain.is_dead(state) and state.grid[state.agent] == bd.EXPLOSION
    assert all(domain.step(state, action) is state for action in range(4))
    assert domain.heuristic(state) == float("inf")


def test_may_reach_accepts_every_later_state_of_the_official_traces():
    domain = get_domain("boulderdash")
    rejected_somewhere = False
    for record in trace_records()[::3]:
        observations = domain.observe(trajectory(domain, domain.parse(level_fields(record)), record["actions"]))
        for i in range(0, len(observations), 7):
            later = observations[i:]
            earlier = np.repeat(observations[i : i + 1], len(later), axis=0)
            assert domain.may_reach(earlier, later).all(), f"{record['level']}: state {i} rejects a later one"
            rejected_somewhere |= not domain.may_reach(later, earlier).all()
    assert rejected_somewhere


def test_may_reach_accepts_every_later_state_with_gravity_on_paper_elements():
    domain = get_domain("boulderdash")
    rng = random.Random(5)
    for seed in range(6):
        state = domain.generate(seed, gravity=True, diamonds=4)
        states = [state]
        for _ in range(150):
            if domain.is_goal(state) or domain.is_dead(state):
                break
            state = domain.step(state, rng.randrange(4))
            states.append(state)
        observations = domain.observe(states)
        for i in range(0, len(observations), 10):
            later = observations[i:]
            assert domain.may_reach(np.repeat(observations[i : i + 1], len(later), axis=0), later).all()


def test_trace_replay_reports_a_difference():
    """The replay is a real check: a level played without gravity departs from a gravity trace."""
    domain = get_domain("boulderdash")
    record = next(r for r in trace_records() if r["params"]["gravity"] and len(r["actions"]) > 50)
    assert replay(domain, 0, {**record, "params": {**record["params"], "gravity": False}})


def with_parameters(rows: list[list[int]], required: int, parameters: list[int]) -> list[int]:
    return [len(rows), len(rows[0]), required, *(code for row in rows for code in row), *parameters]


def test_sgps_decisions_where_the_official_code_is_undefined_or_ends():
    domain = get_domain("boulderdash")
    # a gate jump onto the open exit enters it (spec 3.8), on the full scan too
    state = domain.parse(with_parameters([[0, 28, 8, 3]], 0, GRAVITY_ON))
    assert domain.is_goal(domain.step(state, 1))
    # pushing a pebble, stone or void in dirt sideways ends the official process; here it blocks
    for code in (bd.PEBBLE_IN_DIRT, 48, 49):
        state = domain.parse(with_parameters([[0, code, 1, 7]], 0, GRAVITY_ON))
        after = domain.step(state, 1)
        assert after.agent == 0 and after.grid[1] == code
    # a butterfly that turns and moves at once never steps past the first or last cell (officially undefined):
    # left from the first cell (heading up), up from the top row (heading right), down from the bottom row
    # (heading left), right from the last cell (heading down); at the other side edges it wraps (the traces)
    instant = [0, 140, 20, 160000, 0, 1, 2, 0]
    for rows, butterfly in [
        ([[14, 18], [18, 18], [0, 7]], 0),
        ([[18, 17, 18], [18, 18, 18], [0, 7, 1]], 1),
        ([[0, 7, 1], [18, 18, 18], [18, 15, 18]], 7),
        ([[0, 7], [18, 18], [18, 16]], 5),
    ]:
        state = domain.parse(with_parameters(rows, 0, instant))
        after = domain.step(state, 0)
        assert after.grid[butterfly] in bd.BUTTERFLIES and after.grid[butterfly] != state.grid[butterfly]
        assert after.grid.count(bd.EMPTY) == state.grid.count(bd.EMPTY)
    # a falling stone on the bottom row with butterflies turning into diamonds just lands
    state = domain.parse(with_parameters([[0, 7], [4, 1]], 0, [0, 140, 20, 160000, 0, 2, 1, 0]))
    assert domain.step(state, 0).grid[2] == bd.STONE
