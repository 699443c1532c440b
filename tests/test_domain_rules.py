"""Rules that are easy to get wrong, on small hand-made levels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgps.domains import boulderdash as bd
from sgps.domains import craftworld as cw
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


@pytest.mark.parametrize("name", ["tsp", "boxworld", "sokoban", "craftworld", "boulderdash"])
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


CW = {"@": 0, "#": 1, "1": 2, "2": 3, "3": 4, "F": 5, "~": 6, "o": 7, "i": 8, "T": 9, "c": 10, "w": 11, "g": 12,
      "*": 14, " ": 26}  # fmt: skip
USE = 4


def craft_state(rows: list[str], goal: int, held: dict[int, int]):
    """A CraftWorld level with the given inventory (built through the state value)."""
    domain = get_domain("craftworld")
    state = level_from_rows(domain, rows, CW, header=(goal,))
    counts = bytearray(state.inventory)
    for item, count in held.items():
        counts[item] = count
    return state._replace(inventory=bytes(counts))


class TestCraftWorld:
    domain = get_domain("craftworld")

    def test_recipe_priority_when_a_station_can_make_two_recipes(self):
        # Workshop 1 with a bronze bar and wood: nails come before a stick (the trap).
        state = craft_state(["1@"], cw.GEM_RING, {cw.BRONZE_BAR: 1, cw.WOOD: 1})
        state = self.domain.step(state, USE)
        assert cw.inventory_items(state.inventory) == [[cw.WOOD, 1], [cw.NAILS, 1]]
        # Workshop 3 with iron, stick, bronze bar and wood: iron pick first, then bronze pick, then plank.
        state = craft_state(["@3"], cw.GEM_RING, {cw.IRON: 1, cw.STICK: 2, cw.BRONZE_BAR: 1, cw.WOOD: 1})
        state = run(self.domain, state, [USE])
        assert state.inventory[cw.IRON_PICK] == 1 and state.inventory[cw.STICK] == 1
        state = run(self.domain, state, [USE])
        assert state.inventory[cw.BRONZE_PICK] == 1 and state.inventory[cw.STICK] == 0
        state = run(self.domain, state, [USE])
        assert state.inventory[cw.PLANK] == 1 and state.inventory[cw.WOOD] == 0

    def test_iron_needs_a_bronze_pick_and_is_skipped_without_one(self):
        state = craft_state([" i ", " @w", "   "], cw.IRON_PICK, {})
        after = self.domain.step(state, USE)  # up is iron (skipped), right is wood
        assert after.grid[1 * 3 + 2] == cw.EMPTY and after.inventory[cw.WOOD] == 1
        assert after.grid[1] == cw.IRON
        with_pick = craft_state([" i ", " @w", "   "], cw.IRON_PICK, {cw.BRONZE_PICK: 1})
        after = self.domain.step(with_pick, USE)
        assert after.inventory[cw.IRON] == 1 and after.inventory[cw.BRONZE_PICK] == 1 and after.grid[1] == cw.EMPTY

    def test_a_station_ends_the_use_even_when_it_crafts_nothing(self):
        state = craft_state(["2", "@", "w"], cw.GEM_RING, {})
        assert self.domain.step(state, USE) is state

    def test_grass_is_removed_not_collected_and_tools_are_consumed(self):
        state = craft_state(["g@o"], cw.GEM_RING, {cw.IRON_PICK: 1})
        state = self.domain.step(state, USE)  # right (stone) comes before left (grass)
        assert state.grid[2] == cw.EMPTY and state.inventory[cw.IRON_PICK] == 0
        state = self.domain.step(state, USE)
        assert state.grid[0] == cw.EMPTY and not any(state.inventory)
        bridge = craft_state(["@~"], cw.GEM_RING, {cw.BRIDGE: 1})
        bridge = self.domain.step(bridge, USE)
        assert bridge.grid[1] == cw.EMPTY and not any(bridge.inventory)
        no_bridge = craft_state(["@~"], cw.GEM_RING, {})
        assert self.domain.step(no_bridge, USE) is no_bridge

    def test_moves_only_enter_empty_cells_and_goal_is_holding_the_item(self):
        state = craft_state(["@w ", "   "], cw.STICK, {})
        assert self.domain.step(state, RIGHT) is state
        state = run(self.domain, state, [DOWN, RIGHT])
        assert state.agent == 4
        state = run(self.domain, craft_state(["w ", "@1"], cw.STICK, {}), [USE])
        assert state.inventory[cw.WOOD] == 1 and not self.domain.is_goal(state)
        state = run(self.domain, state, [USE])
        assert cw.inventory_items(state.inventory) == [[cw.STICK, 1]] and self.domain.is_goal(state)

    def test_uses_needed_counts_the_recipe_tree_down_to_the_goal(self):
        # An iron pick from nothing: wood x2, stick x2, copper, tin, bronze bar, bronze pick, iron, pick.
        assert self.domain.uses_needed(craft_state(["@"], cw.IRON_PICK, {})) == 10
        held = {cw.STICK: 1, cw.BRONZE_BAR: 1}  # one stick serves both picks in the bound
        assert self.domain.uses_needed(craft_state(["@"], cw.IRON_PICK, held)) == 3  # bronze pick, iron, pick
        assert self.domain.uses_needed(craft_state(["@"], cw.IRON_PICK, {cw.IRON: 1, cw.STICK: 1})) == 1
        goal = craft_state(["@"], cw.IRON_PICK, {cw.IRON_PICK: 1})
        assert self.domain.uses_needed(goal) == 0 and self.domain.heuristic(goal) == 0.0
        state = craft_state(["w ", "@1"], cw.STICK, {})  # collecting and crafting each take one off
        counts = [self.domain.uses_needed(state)]
        for _ in range(2):
            state = self.domain.step(state, USE)
            counts.append(self.domain.uses_needed(state))
        assert counts == [2, 1, 0] and self.domain.is_goal(state)

    def test_inventory_markers_in_the_observation(self):
        state = craft_state(["@       "], cw.GEM_RING, {cw.WOOD: 2, cw.STICK: 1, cw.IRON_PICK: 1, cw.GEM: 1})
        obs = self.domain.observe([state])[0]
        assert obs.shape == (27, 5, 12)
        assert obs[cw.WOOD, 0, 0] == obs[cw.WOOD, 0, 1] == 1 and obs[cw.STICK, 0, 5] == 1 and obs[cw.STICK, 0, 6] == 0
        assert obs[cw.IRON_PICK, 0, 9] == 1 and obs[cw.GEM].sum() == 0
        assert obs[cw.EMPTY, 0, 0] == 0 and obs[cw.EMPTY, 0, 6] == 1 and obs[cw.WALL, 1, 1] == 1
        assert obs.sum(axis=0).max() == 1 and obs[cw.AGENT, 2, 2] == 1


BD = {"@": 0, " ": 1, ".": 2, "*": 5, "E": 7, "O": 8, "#": 18, "R": 27, "r": 28, "1": 29, "B": 30, "b": 31, "2": 32}


class TestBoulderDash:
    domain = get_domain("boulderdash")

    def parse(self, rows: list[str], required: int = 1):
        return level_from_rows(self.domain, rows, BD, header=(required,))

    def test_gate_jump_lands_beyond_the_gate_or_is_blocked_by_a_wall(self):
        state = self.parse(["@r.E*"])
        state = self.domain.step(state, RIGHT)
        assert state.agent == 2 and state.grid[1] == bd.OPEN_GATES[0] and state.grid[0] == bd.EMPTY
        blocked = self.parse(["@r#E*"])
        assert self.domain.step(blocked, RIGHT) is blocked
        edge = self.parse(["E*@r"])
        assert self.domain.step(edge, RIGHT) is edge
        closed = self.parse(["@R E*"])
        assert self.domain.step(closed, RIGHT) is closed

    def test_a_key_opens_every_gate_of_its_colour_only(self):
        state = self.parse(["@1R", "RBE", "*  "])
        state = self.domain.step(state, RIGHT)
        assert state.grid[2] == state.grid[3] == bd.OPEN_GATES[0] and state.grid[4] == bd.CLOSED_GATES[1]

    def test_exit_opens_in_the_step_that_collects_the_last_diamond(self):
        state = self.parse(["@**E"], required=2)
        state = self.domain.step(state, RIGHT)
        assert state.gems == 1 and state.grid[3] == bd.EXIT_CLOSED
        state = self.domain.step(state, RIGHT)
        assert state.gems == 2 and state.grid[3] == bd.EXIT_OPEN
        state = self.domain.step(state, RIGHT)
        assert self.domain.is_goal(state) and state.grid[3] == bd.AGENT_IN_EXIT
        assert self.domain.step(state, LEFT) is state

    def test_jump_landing_collects_a_diamond_and_dirt_is_dug(self):
        state = self.parse(["@.r*E"])
        state = run(self.domain, state, [RIGHT, RIGHT])
        assert state.agent == 3 and state.gems == 1 and state.grid[1] == bd.EMPTY and state.grid[4] == bd.EXIT_OPEN

    def test_solver_merges_dug_and_undug_dirt(self):
        dug = self.parse(["@ .", "*.E"])
        assert self.domain.solver_key(dug) == self.domain.solver_key(self.parse(["@  ", "* E"]))
        assert self.domain.key(dug) != self.domain.key(self.parse(["@  ", "* E"]))
        assert solve(self.domain, dug).length == 3

    def test_observation_maps_hidden_codes_to_visible_channels(self):
        state = self.parse(["@.*E", "Rr1#"])
        obs = self.domain.observe([state])[0]
        assert obs.shape == (34, 2, 4) and obs.sum(axis=0).min() == 1 == obs.sum(axis=0).max()
        assert [int(obs[:, 0, c].argmax()) for c in range(4)] == [0, 2, 4, 5]
        assert [int(obs[:, 1, c].argmax()) for c in range(4)] == [16, 17, 18, 10]
