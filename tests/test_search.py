"""The best-first search engine: costs, optimality, the LevinTS bound, lockstep, graphs, budgets."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgps.domains import get_domain, solve
from sgps.search import (
    BestFirstSearch,
    DomainHeuristic,
    Edge,
    UniformPolicy,
    astar_cost,
    gbfs_cost,
    levin_cost,
    make_algorithm,
    noisy_log_policy,
    phs_cost,
    run,
    run_lockstep,
    run_lockstep_stream,
    search,
    search_lockstep,
    wastar_cost,
)
from sgps.search.costs import LOG_EPSILON

DOMAINS = ["tsp", "boxworld", "sokoban", "craftworld", "boulderdash"]


class SkewedPolicy:
    """A deterministic, state-dependent, far-from-uniform policy plus the domain heuristic."""

    def __init__(self, domain: Any, temperature: float = 1.5) -> None:
        self.domain = domain
        self.temperature = temperature
        self.seen: list[Any] = []

    def __call__(self, states: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        self.seen.extend(states)
        logits = np.array(
            [[zlib.crc32(bytes(self.domain.grid_codes(s)) + bytes([a])) % 1000 / 1000.0 for a in
              range(self.domain.num_actions)] for s in states]
        ) * self.temperature  # fmt: skip
        log_policy = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        heuristic = np.array([self.domain.heuristic(s) for s in states])
        return log_policy, np.where(np.isinf(heuristic), 1e6, heuristic)


# -- costs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("g", "log_pi", "h", "expected"),
    [
        (0, 0.0, 5.0, 0.0),  # the root costs 0
        (1, 0.0, 0.0, math.log(1 + LOG_EPSILON)),  # π = 1, h = 0: ln g
        (2, math.log(0.25), 0.0, math.log(2 + LOG_EPSILON) - math.log(0.25)),
        (2, math.log(0.25), 2.0, math.log(4 + LOG_EPSILON) - 2.0 * math.log(0.25)),  # (1 + h/g) = 2
        (4, math.log(0.5), -3.0, math.log(4 + LOG_EPSILON) - math.log(0.5)),  # h < 0 clamped to 0
        (3, 0.0, 6.0, math.log(9 + LOG_EPSILON)),  # π = 1: ln(g + h)
    ],
)
def test_phs_cost_table(g, log_pi, h, expected):
    assert phs_cost(g, log_pi, h) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("g", "log_pi", "plus_one", "expected"),
    [
        (0, 0.0, False, 0.0),
        (0, 0.0, True, 0.0),  # ln(0 + 1) - 0
        (1, 0.0, False, 0.0),  # π = 1
        (3, math.log(0.1), False, math.log(3) - math.log(0.1)),
        (3, math.log(0.1), True, math.log(4) - math.log(0.1)),  # the paper's (d + 1)/π
    ],
)
def test_levin_cost_table(g, log_pi, plus_one, expected):
    assert levin_cost(g, log_pi, 123.0, plus_one=plus_one) == pytest.approx(expected, abs=1e-12)


def test_heuristic_cost_tables():
    assert wastar_cost(4, -1.0, 2.0) == 7.0 and wastar_cost(4, -1.0, -2.0) == 1.0  # raw h, w = 1.5
    assert wastar_cost(4, 0.0, 2.0, weight=3.0) == 10.0 and wastar_cost(0, 0.0, 0.0) == 0.0
    assert astar_cost(5, -9.0, 2.5) == 7.5 and astar_cost(0, 0.0, -1.0) == -1.0
    assert gbfs_cost(100, -9.0, 2.5) == 2.5


def test_policy_noise_table_including_epsilon_zero():
    log_policy = np.log(np.array([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]]) + 1e-30)
    noisy = noisy_log_policy(log_policy, 0.01)
    assert noisy[0, 0] == pytest.approx(math.log(0.99 + 0.0025 + LOG_EPSILON))
    assert noisy[0, 1] == pytest.approx(math.log(0.0025 + LOG_EPSILON))
    np.testing.assert_allclose(noisy[1], math.log(0.25 + LOG_EPSILON))
    exact = noisy_log_policy(log_policy, 0.0)
    assert exact[0, 0] == pytest.approx(math.log(1 + LOG_EPSILON)) and exact[0, 1] == pytest.approx(math.log(1e-8))
    np.testing.assert_allclose(noisy_log_policy(log_policy, 1.0), math.log(0.25 + LOG_EPSILON))
    with pytest.raises(ValueError, match="epsilon must be in"):
        noisy_log_policy(log_policy, 1.5)


# -- whole searches ------------------------------------------------------------------------


@pytest.mark.parametrize("name", DOMAINS)
def test_astar_with_the_admissible_domain_heuristic_is_optimal(name):
    domain = get_domain(name)
    for seed in range(3):
        level = domain.generate(seed)
        result = search(domain, level, make_algorithm("astar"), DomainHeuristic(domain))
        assert result.solved and result.length == solve(domain, level).length, (name, seed)
        assert domain.is_goal(result.states[-1])


@pytest.mark.parametrize(("name", "levels"), [("tsp", 4), ("boxworld", 3), ("boulderdash", 1)])
@pytest.mark.parametrize("skewed", [False, True])
def test_levin_ts_expansions_respect_the_levin_bound(name, levels, skewed):
    """Orseau et al. (2018): LevinTS expands at most (d(n*) + 1) / π(n*) nodes."""
    domain = get_domain(name)
    algorithm = make_algorithm("levin", plus_one=skewed)
    for seed in range(levels):
        level = domain.generate(seed)
        evaluator = SkewedPolicy(domain) if skewed else UniformPolicy(domain)
        result = search(domain, level, algorithm, evaluator, epsilon=0.01)
        assert result.solved
        bound = (result.length + 1) / math.exp(result.solution_log_prob)
        assert result.expanded <= bound, (name, seed, result.expanded, bound)


@pytest.mark.parametrize("name", ["tsp", "boxworld", "sokoban"])
def test_solutions_replay_and_paths_are_consistent(name):
    domain = get_domain(name)
    level = domain.generate(1)
    for algorithm in ("levin", "phs", "wastar", "gbfs", "bfs"):
        result = search(domain, level, make_algorithm(algorithm), SkewedPolicy(domain))
        assert result.solved
        state = level
        for action, expected in zip(result.actions, result.states[1:], strict=True):
            state = domain.step(state, action)
            assert state == expected
        assert result.states[0] == level and domain.is_goal(state)


def test_the_engine_never_evaluates_a_state_twice_and_the_graph_replays():
    domain = get_domain("sokoban")
    level = domain.generate(4)
    evaluator = SkewedPolicy(domain)
    result = search(domain, level, make_algorithm("phs"), evaluator, budget=3000, record_graph=True)
    keys = [domain.key(s) for s in evaluator.seen]
    assert len(keys) == len(set(keys)) == result.generated
    graph = result.graph
    assert graph.num_nodes == result.generated and graph.parents[0] == -1
    for node in range(1, graph.num_nodes):
        parent = graph.parents[node]
        assert domain.step(graph.states[parent], int(graph.actions[node])) == graph.states[node]
        assert graph.depths[node] == graph.depths[parent] + 1
    edges = graph.edges()
    assert (edges[:, 0] < edges[:, 1]).all() and len(np.unique(edges, axis=0)) == len(edges)
    assert len(graph.rediscovered) > 0
    for u, v in graph.rediscovered[:200]:  # rediscovery edges join states one action apart
        assert any(domain.step(graph.states[u], a) == graph.states[v] for a in range(4)) or any(
            domain.step(graph.states[v], a) == graph.states[u] for a in range(4)
        )
    deep = int(np.argmax(graph.depths))
    ancestor = deep
    for _ in range(5):
        ancestor = int(graph.parents[ancestor])
    assert graph.is_ancestor(ancestor, deep) and not graph.is_ancestor(deep, ancestor)
    states, actions = graph.path(ancestor, deep)
    assert len(actions) == 5 and states[0] == graph.states[ancestor]
    state = states[0]
    for action in actions:
        state = domain.step(state, action)
    assert state == graph.states[deep]
    with pytest.raises(ValueError, match="not an ancestor"):
        graph.path(deep, ancestor)


@pytest.mark.parametrize("algorithm", ["levin", "phs", "wastar"])
def test_budget_boundary(algorithm):
    """The B-th pop ends the search: solved after E expansions needs budget E + 1 (spec 1.4)."""
    domain = get_domain("tsp")
    level = domain.generate(2)
    evaluator = SkewedPolicy(domain)
    free = search(domain, level, make_algorithm(algorithm), evaluator)
    needed = free.expanded
    enough = search(domain, level, make_algorithm(algorithm), evaluator, budget=needed + 1)
    assert enough.solved and enough.expanded == needed and enough.actions == free.actions
    short = search(domain, level, make_algorithm(algorithm), evaluator, budget=needed, record_graph=True)
    assert short.status == "budget" and short.expanded == needed and short.actions is None
    assert short.graph.num_nodes == short.generated


def test_exhausted_open_list_means_no_solution():
    domain = get_domain("tsp")
    walled = domain.parse([2, 3, 1, 2, 3, 0, 2, 0])  # the only city is behind a wall
    result = search(domain, walled, make_algorithm("levin"), UniformPolicy(domain))
    assert result.status == "no_solution" and result.expanded == 2 and result.generated == 2


def test_root_goal_and_epsilon_zero():
    domain = get_domain("tsp")
    level = domain.generate(0)
    exact = search(domain, level, make_algorithm("levin"), SkewedPolicy(domain), epsilon=0.0)
    noisy = search(domain, level, make_algorithm("levin"), SkewedPolicy(domain), epsilon=0.01)
    assert exact.solved and noisy.solved and exact.solution_log_prob != noisy.solution_log_prob
    goal = exact.states[-1]
    at_goal = search(domain, goal, make_algorithm("phs"), SkewedPolicy(domain))
    assert at_goal.solved and at_goal.actions == () and at_goal.expanded == 0


def test_buffered_mode_batches_requests_and_still_solves():
    domain = get_domain("boxworld")
    level = domain.generate(0)
    engine = BestFirstSearch(domain, level, make_algorithm("phs"), batch_size=16)
    sizes = []
    evaluator = DomainHeuristic(domain)
    while states := engine.advance():
        sizes.append(len(states))
        engine.receive(*evaluator(states))
    assert engine.result.solved and max(sizes) >= 16 and sizes[0] == 1
    exact = search(domain, level, make_algorithm("phs"), evaluator)
    assert exact.solved and engine.result.expanded != exact.expanded


def test_evaluator_answers_are_checked():
    domain = get_domain("tsp")
    engine = BestFirstSearch(domain, domain.generate(0), make_algorithm("phs"))
    states = engine.advance()
    with pytest.raises(ValueError, match="expected heuristic of shape"):
        engine.receive(np.zeros((len(states), 4)), None)
    with pytest.raises(ValueError, match="NaN"):
        engine.receive(np.zeros((len(states), 4)), np.array([math.nan]))
    with pytest.raises(ValueError, match="budget must be at least 1"):
        BestFirstSearch(domain, domain.generate(0), make_algorithm("phs"), budget=0)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    count=st.integers(1, 6),
    algorithm=st.sampled_from(["levin", "phs", "wastar"]),
    budget=st.sampled_from([None, 40, 400]),
)
def test_lockstep_equals_searching_each_problem_alone(seed, count, algorithm, budget):
    domain = get_domain("tsp")
    levels = [domain.generate(seed + k, cities=3) for k in range(count)]
    evaluator = SkewedPolicy(domain)
    together = search_lockstep(domain, levels, make_algorithm(algorithm), evaluator, budget=budget)
    for level, joint in zip(levels, together, strict=True):
        alone = run(BestFirstSearch(domain, level, make_algorithm(algorithm), budget=budget), evaluator)
        assert (joint.status, joint.expanded, joint.generated, joint.actions) == (
            alone.status,
            alone.expanded,
            alone.generated,
            alone.actions,
        )
        assert joint.states == alone.states


def test_lockstep_of_searches_with_different_settings_equals_each_alone():
    domain = get_domain("tsp")
    levels = [domain.generate(seed, cities=3) for seed in range(3)]
    settings_of = [("phs", 0.0), ("phs", 0.3), ("levin", 0.01)]  # no shared algorithm and ε: per-search answers
    evaluator = SkewedPolicy(domain)

    def searches() -> list[BestFirstSearch]:
        return [
            BestFirstSearch(domain, level, make_algorithm(name), epsilon=epsilon, budget=200)
            for level, (name, epsilon) in zip(levels, settings_of, strict=True)
        ]

    together = run_lockstep(searches(), evaluator)
    for joint, engine in zip(together, searches(), strict=True):
        alone = run(engine, evaluator)
        assert (joint.status, joint.expanded, joint.generated, joint.actions) == (
            alone.status, alone.expanded, alone.generated, alone.actions,
        )  # fmt: skip


def test_lockstep_tells_each_finish_and_searches_as_without_being_watched():
    domain = get_domain("tsp")
    levels = [domain.generate(seed, cities=3) for seed in range(5)]
    evaluator = SkewedPolicy(domain)
    finished: list[int] = []
    watched = search_lockstep(domain, levels, make_algorithm("phs"), evaluator, budget=150,
                              on_finished=finished.append)  # fmt: skip
    alone = search_lockstep(domain, levels, make_algorithm("phs"), evaluator, budget=150)
    assert [(r.status, r.expanded, r.actions) for r in watched] == [(r.status, r.expanded, r.actions) for r in alone]
    assert finished == sorted(set(finished)) and finished[-1] == len(levels)  # growing counts, ending at all


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), count=st.integers(1, 7), concurrency=st.integers(1, 4),
       batch_size=st.sampled_from([1, 3]))  # fmt: skip
def test_lockstep_a_few_at_a_time_equals_all_at_once_and_never_runs_more(seed, count, concurrency, batch_size):
    """With `concurrency`, the next level's search starts as one finishes: the same results, each
    told once, never more than `concurrency` searches asking at once."""
    domain = get_domain("tsp")
    levels = [domain.generate(seed + k, cities=3) for k in range(count)]
    budgets = [30 + 97 * ((seed + k) % 4) for k in range(count)]  # searches ending at different times
    widest = concurrency * (batch_size + domain.num_actions - 1)  # the most a round of `concurrency` asks

    batches: list[int] = []

    class Watched(SkewedPolicy):
        def __call__(self, states: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
            batches.append(len(states))
            return super().__call__(states)

    def engines() -> list[BestFirstSearch]:
        return [BestFirstSearch(domain, level, make_algorithm("phs"), budget=budget, batch_size=batch_size)
                for level, budget in zip(levels, budgets, strict=True)]  # fmt: skip

    told: list[int] = []
    watched = Watched(domain)
    ran = run_lockstep_stream(enumerate(engines()), watched, concurrency=concurrency,
                              on_result=lambda index, result: told.append(index))  # fmt: skip
    together = run_lockstep(engines(), SkewedPolicy(domain))
    alone = [run(engine, SkewedPolicy(domain)) for engine in engines()]
    assert ran == count and sorted(told) == list(range(count))
    assert max(batches) <= widest
    streamed = search_lockstep(domain, levels, make_algorithm("phs"), SkewedPolicy(domain), budget=max(budgets),
                               batch_size=batch_size, concurrency=concurrency)  # fmt: skip
    everything = search_lockstep(domain, levels, make_algorithm("phs"), SkewedPolicy(domain), budget=max(budgets),
                                 batch_size=batch_size)  # fmt: skip
    for a, b in zip(streamed, everything, strict=True):
        assert (a.status, a.expanded, a.generated, a.actions) == (b.status, b.expanded, b.generated, b.actions)
    for a, b in zip(together, alone, strict=True):
        assert (a.status, a.expanded, a.generated, a.actions) == (b.status, b.expanded, b.generated, b.actions)


def test_lockstep_a_few_at_a_time_counts_the_searches_done_as_they_were_taken():
    """A search finished before it runs (its root a goal) counts among the finished at once, even
    when it is among the last taken: the progress count ends at all of them."""

    class Steps:
        def __init__(self, steps: int) -> None:
            self.steps, self.result = steps, f"after {steps}"

        @property
        def done(self) -> bool:
            return self.steps == 0

        def advance(self) -> list[int]:
            return [self.steps]

        def receive(self, log_policy: np.ndarray, heuristic: np.ndarray | None) -> None:
            self.steps -= 1

    told: list[int] = []
    results: list[tuple[int, str]] = []
    searches = [Steps(2), Steps(0), Steps(0)]
    ran = run_lockstep_stream(enumerate(searches), lambda states: (np.zeros((len(states), 1)), None), concurrency=1,
                              on_finished=told.append, on_result=lambda i, r: results.append((i, r)))  # fmt: skip
    assert ran == 3 and told == [3] and sorted(results) == [(0, "after 2"), (1, "after 0"), (2, "after 0")]


def test_lockstep_refuses_to_run_no_search_at_a_time():
    domain = get_domain("tsp")
    with pytest.raises(ValueError, match="at least one search"):
        run_lockstep_stream([], SkewedPolicy(domain), concurrency=0)


# -- interim budgets: one search records what each smaller budget returns --------------------


class SkewedEdges:
    """A child generator (HIPS-ε's kind of expansion): one primitive edge per action, with
    SkewedPolicy's probabilities, and a rollout of two steps counted in `domain_steps`."""

    def __init__(self, domain: Any) -> None:
        self.domain, self.policy = domain, SkewedPolicy(domain)

    def expand(self, state: Any) -> tuple[list[Edge], int]:
        log_policy, _ = self.policy([state])
        actions = range(self.domain.num_actions)
        return [Edge(self.domain.step(state, a), (a,), float(log_policy[0, a])) for a in actions], len(actions) + 2


def outcome(result: Any) -> tuple[Any, ...]:
    """Everything a search returns but its wall time."""
    return (result.status, result.expanded, result.generated, result.domain_steps, result.actions, result.states,
            result.solution_log_prob)  # fmt: skip


INTERIM_SEARCHES = [  # (algorithm, duplicates, evaluation batch, child generator)
    ("phs", "eager", 1, False), ("levin", "eager", 1, False), ("phs", "eager", 6, False),
    ("levin", "lazy", 1, False), ("phs", "lazy", 4, False), ("astar", "eager", 1, False),
    ("gbfs", "eager", 1, False), ("hips", "eager", 1, True), ("hips", "eager", 3, True),
]  # fmt: skip


@pytest.mark.parametrize(("name", "duplicates", "batch_size", "edges"), INTERIM_SEARCHES)
@pytest.mark.parametrize("seed", [3, 11])
def test_a_search_with_interim_budgets_returns_what_each_smaller_budget_returns(
    name, duplicates, batch_size, edges, seed
):
    # The fear: a test round continued from the previous round's tree differs from a fresh search
    # with the round's budget (one pop too many or too few, the waiting children not counted).
    domain = get_domain("tsp")
    level = domain.generate(seed, cities=4)
    algorithm = make_algorithm(name, duplicates=duplicates)
    options = {"batch_size": batch_size, "children": SkewedEdges(domain) if edges else None}

    def alone(budget: int | None) -> Any:
        return run(BestFirstSearch(domain, level, algorithm, budget=budget, **options), SkewedPolicy(domain))

    needed = alone(None)
    assert needed.solved and needed.expanded >= 8
    end = needed.expanded
    for final, interim in [
        (end + 5, (1, 2, end // 3, end // 2, end - 1, end, end + 1)),  # the last round solves it
        (end, (1, end // 4, end - 2)),  # no round does
        (end + 1, (end,)),  # the round just before the solve
    ]:
        engine = BestFirstSearch(domain, level, algorithm, budget=final, interim_budgets=interim, **options)
        continued = run(engine, SkewedPolicy(domain))
        assert [stop.budget for stop in continued.interim] == [b for b in interim if b <= min(end, final)
                                                                and not (b == end and algorithm.goal_test_at_expansion)]
        for budget in (*interim, final):
            assert outcome(continued.within(budget)) == outcome(alone(budget)), (final, budget)


def test_a_result_tells_only_the_smaller_budgets_it_knows():
    domain = get_domain("tsp")
    level = domain.generate(3, cities=4)
    found_at_generation = search(domain, level, make_algorithm("phs"), SkewedPolicy(domain))
    end = found_at_generation.expanded
    assert outcome(found_at_generation.within(end + 1)) == outcome(search(
        domain, level, make_algorithm("phs"), SkewedPolicy(domain), budget=end + 1))  # fmt: skip
    with pytest.raises(ValueError, match=f"recorded no stop at {end}:"):
        found_at_generation.within(end)  # that search stops at its budget: its goal was to be generated after
    found_at_pop = search(domain, level, make_algorithm("astar"), SkewedPolicy(domain))
    assert found_at_pop.goal_at_pop and not found_at_generation.goal_at_pop
    same_budget = search(domain, level, make_algorithm("astar"), SkewedPolicy(domain), budget=found_at_pop.expanded)
    assert same_budget.solved and outcome(found_at_pop.within(found_at_pop.expanded)) == outcome(same_budget)
    cut = search(domain, level, make_algorithm("phs"), SkewedPolicy(domain), budget=3)
    assert cut.within(3) is cut
    for unknown in (2, 4, 10):  # neither its own budget nor an interim one: smaller, or larger than its own
        with pytest.raises(ValueError, match=f"recorded no stop at {unknown}:"):
            cut.within(unknown)
    at_goal = search(domain, found_at_generation.states[-1], make_algorithm("phs"), SkewedPolicy(domain), budget=9,
                     interim_budgets=(1, 4))  # fmt: skip
    assert at_goal.solved and at_goal.interim == () and at_goal.within(1) is at_goal  # the root is the goal
    unbounded = run(BestFirstSearch(domain, level, make_algorithm("phs"), interim_budgets=(2, 7)), SkewedPolicy(domain))
    assert outcome(unbounded) == outcome(found_at_generation)
    assert [outcome(unbounded.within(b)) for b in (2, 7)] == [
        outcome(search(domain, level, make_algorithm("phs"), SkewedPolicy(domain), budget=b)) for b in (2, 7)]


def test_interim_budgets_on_a_level_without_solution_and_their_checks():
    domain = get_domain("tsp")
    walled = domain.parse([2, 3, 1, 2, 3, 0, 2, 0])  # two expansions empty the open list
    algorithm = make_algorithm("levin")
    continued = run(BestFirstSearch(domain, walled, algorithm, budget=9, interim_budgets=(1, 2)), UniformPolicy(domain))
    for budget in (1, 2, 3, 9):
        fresh = search(domain, walled, algorithm, UniformPolicy(domain), budget=budget)
        assert outcome(continued.within(budget)) == outcome(fresh), budget
    assert [outcome(r)[:2] for r in map(continued.within, (2, 3))] == [("budget", 2), ("no_solution", 2)]
    for interim in [(3, 2), (2, 2), (0, 3), (5,), (7,)]:
        with pytest.raises(ValueError, match="interim budgets must increase"):
            BestFirstSearch(domain, walled, algorithm, budget=5, interim_budgets=interim)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), count=st.integers(1, 5), algorithm=st.sampled_from(["levin", "phs", "wastar"]))
def test_lockstep_searches_with_interim_budgets_equal_fresh_searches(seed, count, algorithm):
    domain = get_domain("tsp")
    levels = [domain.generate(seed + k, cities=3) for k in range(count)]
    budgets = (5, 10, 20, 40)
    together = search_lockstep(domain, levels, make_algorithm(algorithm), SkewedPolicy(domain), budget=80,
                               interim_budgets=budgets)  # fmt: skip
    for budget in (*budgets, 80):
        fresh = search_lockstep(domain, levels, make_algorithm(algorithm), SkewedPolicy(domain), budget=budget)
        assert [outcome(r.within(budget)) for r in together] == [outcome(r) for r in fresh]
