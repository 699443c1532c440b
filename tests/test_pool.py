"""Searching with worker processes gives exactly the results of lockstep search in this process."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sgps.domains import get_domain
from sgps.execution.pool import SearchPool, StreamOptions
from sgps.search import search_lockstep
from sgps.training.config import resolve_config
from sgps.training.setup import build_method


def test_pool_results_equal_in_process_lockstep_results_with_graphs_and_current_weights():
    domain = get_domain("boxworld")
    levels = [domain.generate(seed) for seed in range(5)]
    config = resolve_config("tiny", overrides={"run": {"algorithm": "phs-sg", "device": "cpu"}})
    method = build_method(domain, levels[0], config)
    for parameter in method.model.parameters():  # weights unlike a fresh build: workers must use these
        parameter.data.mul_(1.5)
    expected = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=120, record_graph=True)
    with SearchPool(2, domain, levels[0], config) as pool:
        got = pool.search(method, levels, budget=120, epsilon=0.01, record_graph=True)
        single = pool.search(method, levels[:1], budget=120, epsilon=0.01, record_graph=False)
    assert len(got) == 5 and single[0].expanded == expected[0].expanded
    for a, b in zip(got, expected, strict=True):
        assert (a.status, a.expanded, a.generated, a.actions) == (b.status, b.expanded, b.generated, b.actions)
        np.testing.assert_array_equal(a.graph.parents, b.graph.parents)
        np.testing.assert_array_equal(a.graph.rediscovered, b.graph.rediscovered)


def test_streamed_searches_equal_in_process_lockstep_results_and_each_comes_once():
    """`search_stream`: each worker takes the next level as one of its searches ends; every level's
    result comes once, equal to the in-process search's, and the pool serves another call after it;
    a search that raises in a worker raises in the caller, and the pool then takes no other call."""
    domain = get_domain("boxworld")
    levels = [domain.generate(seed) for seed in range(5)]
    config = resolve_config("tiny", overrides={"run": {"algorithm": "phs-sg", "device": "cpu"}})
    method = build_method(domain, levels[0], config)
    for parameter in method.model.parameters():
        parameter.data.mul_(1.5)
    expected = search_lockstep(domain, levels, method.algorithm, method.test_evaluator(), budget=150,
                               interim_budgets=(40, 80))  # fmt: skip
    options = StreamOptions(budget=150, epsilon=0.01, batch_size=1, interim_budgets=(40, 80), test=True,
                            concurrency=2)  # fmt: skip
    with SearchPool(2, domain, levels[0], config) as pool:
        calls = []
        for chosen, at_once in ((levels, 2), (levels[2:4], 1)):  # 1: one process searches, the other waits
            calls.append([])
            pool.search_stream(method, chosen, dataclasses.replace(options, concurrency=at_once),
                               lambda index, result: calls[-1].append((index, result)))  # fmt: skip
        wrong = dataclasses.replace(options, interim_budgets=(400,))  # a worker's error reaches the caller
        with pytest.raises(ValueError, match="interim budgets"):
            pool.search_stream(method, levels, wrong, lambda index, result: None)
        with pytest.raises(RuntimeError, match="earlier failure"):  # its tasks could mix with the next call's
            pool.search(method, levels, budget=120, epsilon=0.01, record_graph=False)
        pool.close(at_once=True)  # as the `with` block does after an error: nothing left to stop
    assert sorted(index for index, _ in calls[0]) == list(range(5))
    assert sorted(index for index, _ in calls[1]) == [0, 1]
    for index, result in calls[0]:
        want = expected[index]
        assert (result.status, result.expanded, result.generated, result.actions) == (
            want.status, want.expanded, want.generated, want.actions)  # fmt: skip
        assert [result.within(b).expanded for b in (40, 80)] == [want.within(b).expanded for b in (40, 80)]
    for index, result in calls[1]:
        assert result.expanded == expected[2 + index].expanded


def test_a_run_keeps_its_set_up_out_of_full_collections_and_gives_it_back(tmp_path, monkeypatch):
    import gc

    from sgps.domains.levels import write_levels
    from sgps.runs import runner

    frozen_during = []
    run = runner._run_with_progress

    def recorded(*args, **kwargs):
        frozen_during.append(gc.get_freeze_count())
        return run(*args, **kwargs)

    monkeypatch.setattr(runner, "_run_with_progress", recorded)
    domain = get_domain("tsp")
    problems = tmp_path / "train.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(8)])
    assert gc.get_freeze_count() == 0
    runner.train(problems, tmp_path / "run", preset="tiny", quiet=True, max_batches=1,
                 overrides={"run": {"device": "cpu", "workers": 1}})  # fmt: skip
    assert frozen_during and frozen_during[0] > 0  # the problems, networks and loop were frozen
    assert gc.get_freeze_count() == 0  # and given back to the collector after the run


def test_a_process_that_froze_objects_itself_keeps_its_collector_as_it_was(monkeypatch):
    """Neither frozen nor unfrozen by the run. (Calls are counted, not objects: a frozen object that another
    thread frees, e.g. the test runner's, leaves the frozen generation and changes the count.)"""
    import gc

    from sgps.training.setup import setup_frozen

    assert gc.get_freeze_count() == 0
    gc.freeze()
    calls: list[str] = []
    try:
        monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
        monkeypatch.setattr(gc, "collect", lambda *args: calls.append("collect") or 0)
        with setup_frozen():
            pass
        assert calls == []
    finally:
        monkeypatch.undo()
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
