"""Rules that are easy to get wrong, on small hand-made levels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgps.domains import get_domain, solve
from sgps.domains.boxworld import GEM, NO_KEY
from sgps.domains.tsp import AGENT_AT_START, START, VISITED

from helpers import level_from_rows, run

UP, RIGHT, DOWN, LEFT = range(4)

TSP = {" ": 0, "@": 1, "#": 2, "o": 3}
BOX = {" ": 14, "@": 13, "#": 15, **{chr(97 + c): c for c in range(12)}, "!": GEM}
SOK = {"@": 0, "#": 1, "$": 2, ".": 3, " ": 4, "+": 5, "*": 6}


class TestTsp:
    domain = get_domain("tsp")

    def test_first_city_entered_becomes_start_and_goal_needs_return(self):
        state = level_from_rows(self.domain, ["o@ o", "    "], TSP)
        state = run(self.domain, state, [LEFT])
        assert state.start == 0 and state.remaining == 1 and state.grid[0] == AGENT_AT_START
        state = run(self.domain, state, [RIGHT, RIGHT, RIGHT])
        assert state.remaining == 0 and not self.domain.is_goal(state)
        assert state.grid[0] == START
        state = run(self.domain, state, [LEFT, LEFT])
        assert state.grid[3] == VISITED and not self.domain.is_goal(state)
        state = run(self.domain, state, [LEFT])
        assert self.domain.is_goal(state)

    def test_walls_and_edges_are_self_loops_returning_the_same_state(self):
        state = level_from_rows(self.domain, ["@#", "o "], TSP)
        assert self.domain.step(state, UP) is state
        assert self.domain.step(state, LEFT) is state
        assert self.domain.step(state, RIGHT) is state

    def test_revisiting_a_city_does_not_count_twice(self):
        state = level_from_rows(self.domain, ["@o o"], TSP)
        state = run(self.domain, state, [RIGHT, RIGHT, LEFT, RIGHT])
        assert state.remaining == 1 and state.start == 1

    def test_unreachable_city_has_infinite_heuristic(self):
        state = level_from_rows(self.domain, ["@ #o", "  ##"], TSP)
        assert self.domain.heuristic(state) == math.inf
        assert solve(self.domain, state).status == "unsolvable"


class TestBoxWorld:
    domain = get_domain("boxworld")

    def test_key_pickup_and_box_opening_from_the_right(self):
        state = level_from_rows(self.domain, ["a  !a", "@    "], BOX)
        state = run(self.domain, state, [UP])
        assert state.inventory == 0 and state.grid[0] == 13
        state = run(self.domain, state, [DOWN, RIGHT, RIGHT, RIGHT, RIGHT, UP])
        assert self.domain.is_goal(state) and state.inventory == GEM
        assert state.grid[3] == 14 and state.grid[4] == 13

    def test_box_cannot_be_opened_from_the_left_or_with_a_wrong_key(self):
        state = level_from_rows(self.domain, ["  !a", "b@  "], BOX)
        state = run(self.domain, state, [LEFT])  # now holding b
        assert state.inventory == 1
        opened_from_below = run(self.domain, state, [RIGHT, RIGHT, RIGHT, UP])
        assert opened_from_below.inventory == 1  # wrong colour: blocked
        state = level_from_rows(self.domain, ["a !a", "  @ "], BOX)
        state = run(self.domain, state, [LEFT, LEFT, UP])  # pick up a
        state = run(self.domain, state, [RIGHT])  # the content cell blocks from the left
        assert state.agent == 1 and state.inventory == 0

    @pytest.mark.parametrize(("rows", "onto_lock"), [(["a  @", "  !a"], DOWN), (["  !a", "a  @"], UP)])
    def test_box_opens_from_above_and_below(self, rows, onto_lock):
        state = level_from_rows(self.domain, rows, BOX)
        state = run(self.domain, state, [LEFT, LEFT, LEFT])
        assert state.inventory == 0
        state = run(self.domain, state, [RIGHT, RIGHT, RIGHT, onto_lock])
        assert self.domain.is_goal(state)

    def test_a_second_loose_key_overwrites_the_held_one(self):
        state = level_from_rows(self.domain, ["a@ b"], BOX)
        state = run(self.domain, state, [LEFT, RIGHT, RIGHT, RIGHT])
        assert state.inventory == 1 and self.domain.loose_keys(state) == []

    def test_wall_code_is_impassable_and_never_a_key(self):
        state = level_from_rows(self.domain, ["@#  "], BOX)
        assert self.domain.step(state, RIGHT) is state
        assert self.domain.loose_keys(state) == [] and self.domain.locks(state) == []

    def test_observation_border_corners_and_held_key(self):
        state = level_from_rows(self.domain, ["c@ "], BOX)
        obs = self.domain.observe([state, run(self.domain, state, [LEFT])])
        assert obs.shape == (2, 16, 3, 5)
        assert obs[0, :, 0, 0].sum() == 0 and obs[1, 2, 0, 0] == 1 and obs[1, :, 0, 0].sum() == 1
        assert obs[0, 15, 0, 1:4].all() and obs[0, :, -1, -1].sum() == 0
        assert state.inventory == NO_KEY


class TestSokoban:
    domain = get_domain("sokoban")

    def test_push_onto_goal_and_solve(self):
        state = level_from_rows(self.domain, ["#####", "#@$.#", "#####"], SOK)
        state = run(self.domain, state, [RIGHT])
        assert self.domain.is_goal(state) and state.grid[8] == 6 and state.grid[7] == 0

    def test_push_blocked_by_wall_box_and_edge(self):
        # boxes cannot be pushed into a box, a wall, or off the grid
        state = level_from_rows(self.domain, ["@$$.", " $#.", "   ."], SOK)
        assert self.domain.step(state, RIGHT) is state
        moved = run(self.domain, state, [DOWN])
        assert moved.agent == 4
        assert self.domain.step(moved, RIGHT) is moved
        edge = level_from_rows(self.domain, [" $.", " @ "], SOK)
        assert self.domain.step(edge, UP) is edge

    def test_agent_on_goal_codes(self):
        state = level_from_rows(self.domain, ["@.$ *"], SOK)
        state = run(self.domain, state, [RIGHT])
        assert state.grid[1] == 5 and self.domain.grid_codes(state)[0] == 4
        state = run(self.domain, state, [RIGHT])
        assert state.grid[1] == 3

    def test_heuristic_is_infinite_for_a_box_in_a_corner(self):
        state = level_from_rows(self.domain, ["#####", "#$  #", "# @.#", "#####"], SOK)
        assert self.domain.heuristic(state) == math.inf

    def test_compact_observation_sets_goal_under_box_and_agent(self):
        state = level_from_rows(self.domain, ["+*$$.#"], SOK)
        obs = self.domain.observe([state])[0]
        assert obs.shape == (4, 1, 6)
        np.testing.assert_array_equal(obs[:, 0, 0], [1, 0, 0, 1])
        np.testing.assert_array_equal(obs[:, 0, 1], [0, 0, 1, 1])
        np.testing.assert_array_equal(obs[:, 0, 2], [0, 0, 1, 0])
        np.testing.assert_array_equal(obs[:, 0, 4], [0, 0, 0, 1])
        np.testing.assert_array_equal(obs[:, 0, 5], [0, 1, 0, 0])


@pytest.mark.parametrize("name", ["tsp", "boxworld", "sokoban"])
def test_heuristic_is_a_lower_bound_along_optimal_solutions(name):
    domain = get_domain(name)
    for seed in range(4):
        state = domain.generate(seed)
        result = solve(domain, state, method="bfs", max_states=500_000)
        assert result.status == "solved"
        remaining = result.length
        for action in result.actions:
            assert domain.heuristic(state) <= remaining
            state = domain.step(state, action)
            remaining -= 1
        assert domain.is_goal(state)


@pytest.mark.parametrize("name", ["tsp", "boxworld", "sokoban"])
def test_observe_rejects_mixed_sizes_and_batches_consistently(name):
    domain = get_domain(name)
    small = domain.generate(0) if name != "tsp" else domain.generate(0, size=10)
    batch = domain.observe([small, small])
    assert batch.dtype == np.float32 and batch.shape == (2, *domain.observation_shape(small))
    np.testing.assert_array_equal(batch[0], domain.observe([small])[0])
    other = {"tsp": {"size": 16, "cities": 8}, "boxworld": {"size": 12}, "sokoban": {"size": 8}}[name]
    with pytest.raises(ValueError, match="mixes level sizes"):
        domain.observe([small, domain.generate(1, **other)])


def test_states_are_hashable_values_equal_across_parses():
    domain = get_domain("boxworld")
    level = domain.generate(3)
    again = domain.parse(domain.encode(level))
    assert again == level and hash(again) == hash(level)
    import pickle

    copied = pickle.loads(pickle.dumps(level))
    assert copied == level and copied.board is level.board
