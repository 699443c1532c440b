"""Edge cases where our domains must agree with the reference simulators, and the action table in the docs."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from sgps.domains import boulderdash as bd
from sgps.domains import craftworld as cw
from sgps.domains import get_domain, solve
from sgps.domains.base import MOVE_DELTAS
from sgps.domains.generation import resolve_params

from helpers import run

UP, RIGHT, DOWN, LEFT = range(4)
USE = 4
BUILT_IN = ("boulderdash", "boxworld", "craftworld", "sokoban", "tsp")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "domains.md"

# BoulderDash codes, short names for the expected grids.
AG, EM, DI, DM, FD, XC, BR, ST, EX = 0, 1, 2, 5, 6, 7, 18, 19, 26


def parse_line(domain_name: str, line: str):
    """The initial state of a level written as one native level line."""
    return get_domain(domain_name).parse([int(field) for field in line.split("|")])


class TestBoulderDashFallingDiamond:
    """Code 6 moves even with gravity off, as in the reference's falling-diamond update."""

    domain = get_domain("boulderdash")

    def test_falls_into_the_empty_cell_below_then_lands_on_the_bottom_row(self):
        # " *"      "  "      "  "
        # "@ "  ->  "@*"  ->  "@*" (resting)
        state = run(self.domain, parse_line("boulderdash", "2|2|1|1|6|0|1"), [LEFT])
        assert list(state.grid) == [EM, EM, AG, FD]
        state = self.domain.step(state, LEFT)
        assert list(state.grid) == [EM, EM, AG, DM] and not self.domain.is_dead(state)

    def test_rolls_left_off_a_brick_wall(self):
        # " *@"      "* @"
        # " # "  ->  " # "
        state = run(self.domain, parse_line("boulderdash", "2|3|0|1|6|0|1|18|1"), [RIGHT])
        assert list(state.grid) == [FD, EM, AG, EM, BR, EM]

    def test_rolls_right_off_a_diamond_when_left_is_dirt_and_moves_once_per_step(self):
        # ".* @"      ". *@"
        # " *  "  ->  " *  "  (not also falling on in the same step)
        state = run(self.domain, parse_line("boulderdash", "2|4|0|2|6|1|0|1|5|1|1"), [RIGHT])
        assert list(state.grid) == [DI, EM, FD, AG, EM, DM, EM, EM]

    def test_lands_as_a_resting_diamond_at_the_bottom_edge(self):
        # "@"      "@"
        # "*"  ->  "*" (resting)
        state = run(self.domain, parse_line("boulderdash", "2|1|0|0|6"), [LEFT])
        assert list(state.grid) == [AG, DM]

    def test_scan_is_row_major_so_a_diamond_above_a_falling_one_lands(self):
        # "*@"      "*@" (upper one resting)
        # "* "  ->  "  "
        # "  "      "* "
        state = run(self.domain, parse_line("boulderdash", "3|2|0|6|0|6|1|1|1"), [UP])
        assert list(state.grid) == [DM, AG, EM, EM, FD, EM]

    @pytest.mark.parametrize(
        ("line", "action", "grid", "agent"),
        [
            ("2|1|0|6|0", RIGHT, [EX, EX], 1),  # the agent stays under the diamond
            ("3|1|0|6|1|0", UP, [EX, EX, EX], 1),  # the agent walks in under it
        ],
    )
    def test_landing_on_the_agent_explodes_and_kills_it(self, line, action, grid, agent):
        state = run(self.domain, parse_line("boulderdash", line), [action])
        assert list(state.grid) == grid and state.agent == agent
        assert self.domain.is_dead(state) and not self.domain.is_goal(state)
        assert self.domain.heuristic(state) == math.inf
        assert all(self.domain.step(state, a) is state for a in range(4))
        with pytest.raises(ValueError, match="agent was killed"):
            self.domain.encode(state)

    def test_explosion_spares_what_cannot_be_consumed(self):
        # "#*."      "%%%"
        # "X@R"  ->  "X%R"  (steel wall, closed gate, exit and key survive)
        # "*E1"      "%E1"
        state = parse_line("boulderdash", "3|3|2|18|6|2|19|0|27|5|7|29")
        state = self.domain.step(state, DOWN)  # blocked by the closed exit
        assert list(state.grid) == [EX, EX, EX, ST, EX, bd.CLOSED_GATES[0], EX, XC, bd.KEYS[0]]
        assert self.domain.is_dead(state)
        assert self.domain.observe([state])[0, 15].tolist() == [[1, 1, 1], [0, 1, 0], [1, 0, 0]]

    def test_walking_into_a_falling_diamond_collects_it(self):
        state = run(self.domain, parse_line("boulderdash", "1|2|1|0|6"), [RIGHT])
        assert list(state.grid) == [EM, AG] and state.gems == 1

    def test_solver_keeps_dirt_apart_from_empty_while_a_diamond_falls(self):
        dirt = parse_line("boulderdash", "2|2|0|6|0|2|1")
        empty = parse_line("boulderdash", "2|2|0|6|0|1|1")
        assert self.domain.solver_key(dirt) != self.domain.solver_key(empty)
        assert list(self.domain.step(dirt, UP).grid) == [DM, AG, DI, EM]
        assert list(self.domain.step(empty, UP).grid) == [EM, AG, FD, EM]


class TestCraftWorldLargeInventories:
    domain = get_domain("craftworld")

    def test_counts_go_past_255_on_a_level_full_of_wood(self):
        # 2x150: the agent in the top-left corner, wood everywhere else. Each
        # (use, use, right) takes the wood to the right and below, then steps right.
        state = parse_line("craftworld", "|".join(map(str, [2, 150, cw.GEM_RING, cw.AGENT, *[cw.WOOD] * 299])))
        state = run(self.domain, state, [USE, USE, RIGHT] * 127 + [USE, USE])
        assert cw.inventory_items(state.inventory) == [[cw.WOOD, 256]]
        top = [cw.EMPTY] * 127 + [cw.AGENT, cw.EMPTY] + [cw.WOOD] * 21
        bottom = [cw.EMPTY] * 128 + [cw.WOOD] * 22
        assert list(state.grid) == top + bottom and state.agent == 127
        markers = self.domain.observe([state])[0, :, 0, :2]
        assert markers[cw.WOOD].tolist() == [1, 1] and markers[cw.EMPTY].tolist() == [0, 0]
        state = run(self.domain, state, [RIGHT, USE])
        assert state.inventory[cw.WOOD] == 257

    def test_counts_beyond_two_to_the_fifteen_and_back_below_256_compare_equal(self):
        start = parse_line("craftworld", f"1|3|{cw.IRON_PICK}|{cw.AGENT}|{cw.WOOD}|{cw.WORKSHOP1}")
        counts = list(start.inventory)
        counts[cw.WOOD] = 40_000
        state = run(self.domain, start._replace(inventory=tuple(counts)), [USE, RIGHT, USE])
        assert cw.inventory_items(state.inventory) == [[cw.WOOD, 40_000], [cw.STICK, 1]]

        counts[cw.WOOD] = 256
        crafted = run(self.domain, start._replace(inventory=tuple(counts)), [USE, RIGHT, USE, USE])
        counts[cw.WOOD], counts[cw.STICK] = 255, 2
        direct = crafted._replace(inventory=bytes(counts))
        assert crafted == direct and hash(crafted) == hash(direct)


class TestSokobanGeneratedLevels:
    domain = get_domain("sokoban")

    def test_default_levels_start_the_agent_off_the_goals(self):
        # Seed 13's best reverse-play position has the agent on a goal; by default the
        # generator takes the best position with the agent elsewhere.
        rows = [
            "##########",
            "##########",
            "##########",
            "##########",
            "# ########",
            "# ### .###",
            "#  ##   ##",
            "# .$.$$$.#",
            "#   @   ##",
            "##########",
        ]
        level = self.domain.generate(13)
        assert self.domain.render_text(level).splitlines()[:10] == rows
        assert max(self.domain.grid_codes(level)) <= 4  # official codes only
        assert solve(self.domain, level).length == 12

    def test_agent_on_goal_is_available_on_request(self):
        params = resolve_params(self.domain, "standard", {"agent_on_goal": "true"})
        level = self.domain.generate(13, **params)
        assert self.domain.render_text(level).splitlines()[7:9] == ["# .$+$$$.#", "#       ##"]
        assert level.grid[level.agent] == 5
        assert solve(self.domain, level).length == 11


def documented_actions() -> dict[str, list[tuple[int, str, str]]]:
    """The table under '## Actions' in docs/domains.md: column -> [(action, move, entry)]."""
    section = DOCS.read_text().split("\n## Actions\n", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|")]  # fmt: skip
    header, body = rows[0], rows[2:]  # rows[1] is the separator
    return {
        column: [(int(row[0]), row[1], row[k]) for row in body]
        for k, column in enumerate(header) if k >= 2
    }  # fmt: skip


def test_documented_action_table_matches_the_code():
    table = documented_actions()
    assert sorted(table) == sorted(BUILT_IN)
    for name, entries in table.items():
        names = tuple(entry for _, _, entry in entries if entry)
        assert names == get_domain(name).action_names, name
        assert [action for action, _, entry in entries if entry] == list(range(len(names))), name
    for action, move, _ in table["tsp"]:
        delta = tuple(int(part) for part in re.findall(r"[-+]?\d+", move))
        assert delta == (MOVE_DELTAS[action] if action < len(MOVE_DELTAS) else ()), action
