"""Level generators: reproduction of the official sets, determinism, round trips, solvability."""

from __future__ import annotations

import pytest

from sgps.domains import boulderdash as bd
from sgps.domains import craftworld as cw
from sgps.domains import domain_names, get_domain, read_levels, solve, write_levels
from sgps.domains.generation import generate_levels, resolve_params
from sgps.domains.levels import format_level
from sgps.errors import ConfigError

from traces import records

#: (domain, trace level set, first seed, generator overrides) of the official test sets.
OFFICIAL_SETS = [
    ("tsp", "tsp_test_10", 100, {"size": 10, "cities": 2}),
    ("tsp", "tsp_test_16", 11000, {"size": 16, "cities": 8}),
    ("boxworld", "boxworld_test_100", 50000, {}),
    ("craftworld", "craftworld_test_100", 50000, {"goal": "gem_ring"}),
    ("craftworld", "craftworld_test_100_hard", 20000, {"size": 18, "grass": 4, "water": True, "goal": "iron_pick"}),
    ("boulderdash", "boulderdash_one_key_test_100", 50001, {}),
    ("boulderdash", "boulderdash_test_hard_100", 40000, {"diamonds": 4}),
]

VARIANTS = [(name, variant) for name in domain_names() for variant in get_domain(name).variants]


@pytest.mark.parametrize(("name", "level_set", "first_seed", "params"), OFFICIAL_SETS)
def test_official_test_sets_are_reproduced_exactly(shared, name, level_set, first_seed, params):
    domain = get_domain(name)
    for record in records(shared / "reference", "solutions", level_set):
        state = domain.generate(first_seed + record["level_index"], **params)
        assert format_level(domain, state) == record["level"], record["level_index"]


@pytest.mark.parametrize(("name", "variant"), VARIANTS)
def test_same_seed_same_file_and_levels_parse_back(tmp_path, name, variant):
    domain = get_domain(name)
    params = resolve_params(domain, variant)
    files = []
    for attempt in range(2):
        states = generate_levels(domain, params, seed=7, count=4)
        files.append(tmp_path / f"{attempt}.txt")
        write_levels(files[-1], domain, states, variant=variant, seed=7, params=params)
    assert files[0].read_bytes() == files[1].read_bytes()
    assert read_levels(files[0]).states() == states
    assert generate_levels(domain, params, seed=8, count=1)[0] != states[0]


@pytest.mark.parametrize(("name", "variant"), VARIANTS)
def test_generated_levels_are_solvable(name, variant):
    domain = get_domain(name)
    params = resolve_params(domain, variant)
    for state in generate_levels(domain, params, seed=1000, count=3):
        result = solve(domain, state, max_states=1_000_000)
        assert result.status == "solved", domain.render_text(state)
        assert result.length > 0


def test_tsp_variants_have_the_documented_sizes():
    domain = get_domain("tsp")
    for variant, (size, cities) in {"standard": (10, 2), "hard": (10, 6), "large": (16, 8)}.items():
        state = domain.generate(5, **resolve_params(domain, variant))
        assert (state.board.rows, state.board.cols, len(state.board.extra.cities)) == (size, size, cities)


def test_boxworld_standard_structure_and_fixed_chains():
    domain = get_domain("boxworld")
    for seed in range(20):
        state = domain.generate(seed)
        assert len(domain.locks(state)) == 10 and len(domain.loose_keys(state)) == 1
        assert state.grid.count(12) == 1
    quirk, fixed = domain.generate(3), domain.generate(3, fixed_chains=True)
    assert quirk.grid != fixed.grid
    assert sorted(domain.locks(quirk)) == sorted(domain.locks(fixed))  # same layout, other contents
    assert solve(domain, fixed).status == "solved"


def test_sokoban_levels_look_like_boxoban():
    domain = get_domain("sokoban")
    lengths = []
    for seed in range(12):
        state = domain.generate(seed)
        codes = domain.grid_codes(state)
        assert len(domain.boxes(state)) == 4
        border = codes[:10] + codes[-10:] + codes[::10] + codes[9::10]
        assert set(border) == {1}
        assert not any(code == 6 for code in codes)  # no box starts on its goal
        lengths.append(solve(domain, state).length)
    assert 20 <= sum(lengths) / len(lengths) <= 50  # Boxoban unfiltered test: mean 31.6


def test_generator_parameters_are_checked():
    domain = get_domain("tsp")
    with pytest.raises(ConfigError, match="unknown tsp generator parameter 'towns'"):
        resolve_params(domain, "standard", {"towns": "3"})
    with pytest.raises(ConfigError, match="no generator variant 'huge'"):
        resolve_params(domain, "huge")
    for text in ("many", "٣", " 3", "+3", "1_0"):  # ASCII digits only
        with pytest.raises(ConfigError, match="'cities' must be an integer"):
            resolve_params(domain, "standard", {"cities": text})
    assert resolve_params(domain, "hard", {"cities": "7", "walls": "false"}) == {
        "size": 10,
        "cities": 7,
        "walls": False,
    }
    with pytest.raises(ConfigError, match="seed 0: 200 cities and an agent do not fit"):
        generate_levels(domain, resolve_params(domain, "standard", {"cities": "200"}), 0, 1)


def test_craftworld_goal_option_and_hard_layout():
    domain = get_domain("craftworld")
    goals = {domain.generate(seed).board.extra for seed in range(40)}
    assert goals == {cw.BRONZE_PICK, cw.IRON_PICK, cw.GEM_RING}  # the training mix
    for seed in range(5):
        ring = domain.generate(seed, goal="gem_ring")
        gem = ring.grid.index(cw.GEM)
        assert ring.board.extra == cw.GEM_RING
        assert [ring.grid[gem + d] for d in (-14, 14, -1, 1)] == [cw.STONE] * 4
        hard = domain.generate(seed, **resolve_params(domain, "hard", {"goal": "iron_pick"}))
        assert hard.board.rows == 18 and hard.grid.count(cw.WATER) == 28 and hard.grid.count(cw.GRASS) == 4
        assert hard.board.extra == cw.IRON_PICK and cw.GEM not in hard.grid
    with pytest.raises(ValueError, match="goal must be 'mix' or one of"):
        domain.generate(0, goal="gold_bar")


def test_boulderdash_variants_have_their_locks_keys_and_diamonds():
    domain = get_domain("boulderdash")
    for seed in range(10):
        standard = domain.generate(seed, **resolve_params(domain, "standard"))
        hard = domain.generate(seed, **resolve_params(domain, "hard"))
        ood = domain.generate(seed, **resolve_params(domain, "ood"))
        for state, diamonds, locked in ((standard, 1, 1), (hard, 4, 1), (ood, 1, 2)):
            closed = [code for code in state.grid if code in bd.CLOSED_GATES]
            assert len(closed) == locked and state.grid.count(bd.DIAMOND) == diamonds == state.board.extra
            assert state.grid.count(bd.EXIT_CLOSED) == 1 and state.grid.count(bd.BRICK_WALL) >= 30
            keys = {code for code in state.grid if code in bd.KEYS}
            assert {bd.KEYS[bd.CLOSED_GATES.index(gate)] for gate in closed} <= keys


def test_boulderdash_ood_levels_need_both_keys():
    """Every solution of an out-of-distribution level passes both locked gates' keys."""
    domain = get_domain("boulderdash")
    lengths = []
    for seed in range(6):
        state = domain.generate(seed, keys=2, decoy=False)
        result = solve(domain, state)
        assert result.status == "solved"
        lengths.append(result.length)
        replay = state
        for action in result.actions:
            replay = domain.step(replay, action)
        assert not any(code in bd.CLOSED_GATES for code in replay.grid)
    assert 45 <= sum(lengths) / len(lengths) <= 100  # the paper's OOD solutions are about 70 steps
