"""Search processes around one shared evaluator give exactly the results of lockstep search in one process."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from sgps.domains import get_domain
from sgps.errors import SearchProcessLostError
from sgps.execution.pool import SharedEvaluatorPool, StreamOptions, request_rows
from sgps.execution.shared import SearchProcessError, create_layouts, remove_layouts
from sgps.search import search_lockstep
from sgps.training.config import resolve_config
from sgps.training.setup import build_method, evaluator_place


def _method(domain, levels, algorithm):
    config = resolve_config("tiny", overrides={"run": {"algorithm": algorithm, "device": "cpu"}})
    method = build_method(domain, levels[0], config)
    torch.manual_seed(5)  # weights unlike a fresh build: the server must evaluate with the live ones
    module = method.model if hasattr(method, "model") else method.learner.network
    for parameter in module.parameters():
        parameter.data.add_(0.2 * torch.randn_like(parameter))
    return method


def _tsp_phs(count):
    """TSP levels 0..count-1 and a flat PHS*(π) method with perturbed weights."""
    domain = get_domain("tsp")
    levels = [domain.generate(seed) for seed in range(count)]
    return domain, levels, _method(domain, levels, "phs")


def _same(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert (a.status, a.expanded, a.generated, a.actions) == (b.status, b.expanded, b.generated, b.actions)
        # ln π of the solution: the network's rounding differs with the batch's size (CPU kernels), not its order
        if b.solved:
            assert a.solution_log_prob == pytest.approx(b.solution_log_prob, rel=1e-6)
        if b.graph is not None:
            np.testing.assert_array_equal(a.graph.parents, b.graph.parents)
            np.testing.assert_array_equal(a.graph.rediscovered, b.graph.rediscovered)


@pytest.mark.parametrize(("domain_name", "algorithm", "batch_size"), [
    ("boxworld", "phs-sg", 1), ("tsp", "phs", 1), ("tsp", "levin", 8),
])  # fmt: skip
def test_two_search_processes_with_a_shared_evaluator_equal_in_process_lockstep(domain_name, algorithm, batch_size):
    domain = get_domain(domain_name)
    levels = [domain.generate(seed) for seed in range(7)]
    method = _method(domain, levels, algorithm)
    options = {"budget": 150, "epsilon": 0.01, "batch_size": batch_size}
    graphs = method.needs_graphs
    expected = search_lockstep(domain, levels, method.algorithm, method.evaluator(), record_graph=graphs, **options)
    expected_test = search_lockstep(domain, levels, method.algorithm, method.test_evaluator(), **options)
    rows = 3  # small on purpose: requests larger than a channel go in parts
    with SharedEvaluatorPool(2, domain, levels[0], method.algorithm, rows) as pool:
        got = pool.search(method, levels, record_graph=graphs, **options)
        got_test = pool.search(method, levels, record_graph=False, test=True, **options)
        assert pool.server.statistics.requests > pool.server.statistics.calls  # requests of both processes batched
    _same(got, expected)
    _same(got_test, expected_test)


def test_streamed_searches_around_a_shared_evaluator_equal_in_process_lockstep_and_each_comes_once():
    """`search_stream`: each process asks for the next level as one of its searches ends; every
    level's result comes once, equal to the in-process search's, whatever share of the searches
    each process runs (1: one of them waits). A search that raises mid-stream is reported once
    the other process has ended the search it had, no further level handed out; the pool goes on."""
    domain = get_domain("boxworld")
    levels = [domain.generate(seed) for seed in range(7)]
    method = _method(domain, levels, "phs-sg")
    expected = search_lockstep(domain, levels, method.algorithm, method.test_evaluator(), budget=150,
                               interim_budgets=(40, 80))  # fmt: skip
    options = StreamOptions(budget=150, epsilon=0.01, batch_size=1, interim_budgets=(40, 80), test=True,
                            concurrency=3)  # fmt: skip
    with SharedEvaluatorPool(2, domain, levels[0], method.algorithm, 3) as pool:
        calls = []
        for at_once in (3, 1):
            calls.append([])
            pool.search_stream(method, levels, dataclasses.replace(options, concurrency=at_once),
                               lambda index, result: calls[-1].append((index, result)))  # fmt: skip
        broken = [levels[0], None, *levels, *levels]  # level 1 is no state: its search raises
        before = []
        with pytest.raises(SearchProcessError, match="a search process failed"):
            pool.search_stream(method, broken, dataclasses.replace(options, concurrency=2),
                               lambda index, result: before.append(index))  # fmt: skip
        assert not pool.broken
        assert len(before) == len(set(before)) and 1 not in before
        assert len(before) < 8  # the 14 levels after it were not all handed out
        again = []
        pool.search_stream(method, levels, options, lambda index, result: again.append((index, result)))
        assert len(pool.search(method, levels, budget=50, epsilon=0.01, record_graph=False)) == 7
    calls.append(again)
    for told in calls:
        assert sorted(index for index, _ in told) == list(range(7))
        _same([result for _, result in sorted(told, key=lambda pair: pair[0])], expected)
        for index, result in told:
            assert [result.within(b).expanded for b in (40, 80)] == [expected[index].within(b).expanded
                                                                      for b in (40, 80)]  # fmt: skip


def test_a_batch_learnt_from_pool_results_gives_the_in_process_weights():
    domain = get_domain("tsp")
    levels = [domain.generate(seed) for seed in range(6)]
    methods = [_method(domain, levels, "phs") for _ in range(2)]
    local = search_lockstep(domain, levels, methods[0].algorithm, methods[0].evaluator(), budget=400)
    assert any(r.solved for r in local)
    methods[0].learn(domain, local)
    with SharedEvaluatorPool(2, domain, levels[0], methods[1].algorithm, 64) as pool:
        methods[1].learn(domain, pool.search(methods[1], levels, budget=400, epsilon=0.01, record_graph=False))
    for name, tensor in methods[0].model_weights().items():
        torch.testing.assert_close(methods[1].model_weights()[name], tensor, rtol=0, atol=0)


def test_a_search_that_raises_in_a_worker_is_reported_and_the_pool_goes_on():
    domain, levels, method = _tsp_phs(3)
    with SharedEvaluatorPool(2, domain, levels[0], method.algorithm, 8) as pool:
        with pytest.raises(SearchProcessError, match="ValueError"):
            pool.search(method, levels, budget=0, epsilon=0.01, record_graph=False)  # budget 0: the engine refuses
        assert not pool.broken
        assert len(pool.search(method, levels, budget=50, epsilon=0.01, record_graph=False)) == 3


def test_channel_files_are_removed_and_places_resolved():
    layouts = create_layouts(2, 4, (3, 5, 5), 4)
    requests, answers = layouts[0].arrays()
    assert requests.shape == (4, 3, 5, 5) and answers.shape == (4, 5)
    assert requests.dtype == np.float32 and answers.dtype == np.float64
    remove_layouts(layouts)
    assert not any(Path(layout.path).exists() for layout in layouts)
    assert evaluator_place("auto", "cuda") == "shared" and evaluator_place("auto", "cpu") == "per-process"
    assert request_rows(16, 1, 4) == 64 and request_rows(1000, 32, 4) == 2048



def test_the_channel_files_are_gone_once_the_workers_run():
    domain, levels, method = _tsp_phs(2)
    with SharedEvaluatorPool(2, domain, levels[0], method.algorithm, 8) as pool:
        assert not any(Path(layout.path).exists() for layout in pool.layouts)
        assert len(pool.search(method, levels, budget=50, epsilon=0.01, record_graph=False)) == 2


def test_an_evaluator_that_raises_stops_the_workers_and_the_pool_refuses_more_batches():
    domain, levels, method = _tsp_phs(4)

    class Broken:
        def evaluate_observations(self, observations):
            raise MemoryError("out of device memory")

    broken = type("BrokenMethod", (), {"evaluator": lambda self: Broken()})()
    with SharedEvaluatorPool(2, domain, levels[0], method.algorithm, 8) as pool:
        with pytest.raises(MemoryError, match="out of device memory"):
            pool.search(broken, levels, budget=50, epsilon=0.01, record_graph=False)
        assert pool.broken and not any(process.is_alive() for process in pool.processes)
        with pytest.raises(RuntimeError, match="stopped after an earlier failure"):
            pool.search(method, levels, budget=50, epsilon=0.01, record_graph=False)


def test_a_search_process_that_dies_is_named():
    domain, levels, method = _tsp_phs(4)

    class Killing:
        """Kills search process 0 at the first request, then answers as the real evaluator."""

        def __init__(self, pool):
            self.pool, self.killed = pool, False

        def evaluate_observations(self, observations):
            if not self.killed:
                self.pool.processes[0].kill()
                self.pool.processes[0].join()
                self.killed = True
            return method.evaluator().evaluate_observations(observations)

    with SharedEvaluatorPool(2, domain, levels[0], method.algorithm, 8) as pool:
        killing = type("KillingMethod", (), {"evaluator": lambda self: Killing(pool)})()
        with pytest.raises(SearchProcessLostError, match="search process 0 stopped unexpectedly"):
            pool.search(killing, levels, budget=2000, epsilon=0.01, record_graph=False)


@pytest.mark.parametrize("evaluator", ["per-process", "shared"])
def test_sgps_test_with_search_processes_writes_the_in_process_record(tmp_path, capsys, evaluator):
    """`sgps test --workers 2` splits the searches over two processes; the record (bar timings) is the same,
    and so it is with the rounds restarted (`--restart-rounds`)."""
    import csv

    from sgps.cli import main
    from sgps.domains import write_levels

    domain = get_domain("tsp")
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    write_levels(train, domain, [domain.generate(seed, size=8, cities=3) for seed in range(12)])
    write_levels(test, domain, [domain.generate(seed, size=8, cities=3) for seed in range(100, 112)])
    run = tmp_path / "run"
    assert main(["train", "--problems", str(train), "--out", str(run), "--preset", "tiny", "--quiet", "--device", "cpu",
                 "--max-iterations", "1", "--evaluator", evaluator]) == 0  # fmt: skip
    records = []
    for options in (["--workers", "1"], ["--workers", "2"], ["--workers", "2", "--restart-rounds"]):
        assert main(["test", str(run), "--problems", str(test), "--budget", "200", "--rounds", "3", *options]) == 0
        with open(run / "metrics" / "test-test.csv", newline="") as handle:
            records.append([{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)])
    assert records[0] == records[1] == records[2] and len(records[0]) > 12  # later rounds tried the unsolved
    assert any(row["solved"] == "1" for row in records[0]) and any(row["solved"] == "0" for row in records[0])
