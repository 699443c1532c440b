"""Sizes that cannot fit are refused before anything starts (`sgps.runs.memory`).

``[network] channels = 4096, blocks = 64`` is inside the schema's ranges, and a run of it
grew to 22 GB and was killed by the kernel (exit -9, no message) after making its run
folder. The estimate, built on the meta device, refuses it at once; every preset on every
domain still fits a 24 GiB machine.
"""

from __future__ import annotations

import dataclasses
import resource
import time

import pytest
import torch
from torch import nn

from sgps.cli import main
from sgps.domains import domain_names, get_domain, write_levels
from sgps.domains.generation import generate_levels, resolve_params
from sgps.errors import ConfigError
from sgps.models.flat import FlatNetwork, FlatNetworkConfig
from sgps.models.hips import HipsModel
from sgps.runs import memory
from sgps.runs.memory import (
    check_fits,
    check_hips_memory,
    estimate_training_memory,
    layer_outputs,
    machine_memory,
    on_meta,
    search_processes,
    size_text,
)
from sgps.training.config import resolve_config
from sgps.training.methods.hips.run import model_config, resolve_settings
from sgps.training.setup import NETWORKS

GIB = 1 << 30
#: The machine the presets must fit: 24 GiB, as the 2-core development VM.
MACHINE = 24 * GIB
BOOTSTRAP = ("phs", "levin", "wastar", "phs-sg", "levin-sg")


@pytest.fixture
def levels(tmp_path):
    tsp = get_domain("tsp")
    write_levels(tmp_path / "train.txt", tsp, [tsp.generate(seed) for seed in range(20)])
    return tmp_path / "train.txt"


def example(name: str, variant: str = "standard"):
    domain = get_domain(name)
    return domain, generate_levels(domain, resolve_params(domain, variant), 0, 1)[0]


def estimate(name: str, preset: str = "cpu", algorithm: str = "phs", searches: int = 32, **sections):
    """The estimate of a CPU run of `preset` with `sections` overridden, on a `name` level."""
    domain, level = example(name)
    config = resolve_config(preset, overrides={"run": {"algorithm": algorithm, "device": "cpu"}, **sections})
    return estimate_training_memory(domain, level, config, searches=searches)


def test_a_network_that_cannot_fit_is_refused_before_any_file_is_made(tmp_path, levels, capsys):
    settings = tmp_path / "big.toml"
    settings.write_text("[network]\nchannels = 4096\nblocks = 64\n")
    out = tmp_path / "run"
    started = time.perf_counter()
    assert main(["train", "--problems", str(levels), "--config", str(settings), "--out", str(out), "--quiet"]) == 2
    assert time.perf_counter() - started < 30
    error = capsys.readouterr().err
    assert not out.exists()
    assert "this run needs about" in error and "TiB of memory" in error
    assert f"more than this machine's memory ({size_text(machine_memory())})" in error
    assert "lower network.channels = 4096, network.blocks = 64" in error
    assert "19.33 G parameters" in error


@pytest.mark.parametrize("algorithm", ["phs-sg", "hips-eps"])
def test_the_other_methods_refuse_networks_that_cannot_fit(tmp_path, levels, capsys, algorithm):
    section = "hips" if algorithm == "hips-eps" else "subgoal"
    settings = tmp_path / "big.toml"
    settings.write_text(f"[{section}]\nchannels = 4096\nblocks = 64\n")
    out = tmp_path / "run"
    argv = ["train", "--problems", str(levels), "--config", str(settings), "--out", str(out), "--quiet"]
    assert main([*argv, "--algorithm", algorithm]) == 2
    error = capsys.readouterr().err
    assert "this run needs about" in error and f"lower {section}.channels = 4096, {section}.blocks = 64" in error
    assert not out.exists()  # HIPS-ε: refused before its levels are solved into RUN/dataset.npz


@pytest.mark.parametrize("preset", ["tiny", "cpu", "paper"])
def test_every_preset_fits_a_24_gib_machine_on_every_domain(preset):
    """With 16 search processes holding a copy each, a GPU's evaluation batch, and both conditionings."""
    largest = 0
    for name in domain_names():
        domain = get_domain(name)
        for variant in domain.variants:
            level = generate_levels(domain, resolve_params(domain, variant), 0, 1)[0]
            for algorithm in BOOTSTRAP:
                for conditioning in ("code-vector", "decoded-state") if algorithm.endswith("-sg") else ("",):
                    overrides = {"run": {"algorithm": algorithm, "device": "cpu"}, "search": {"evaluation_batch": 32}}
                    if conditioning:
                        overrides["subgoal"] = {"conditioning": conditioning}
                    config = resolve_config(preset, overrides=overrides)
                    found = estimate_training_memory(domain, level, config, searches=config.bootstrap.batch_size,
                                                     processes=16, copies=16)  # fmt: skip
                    check_fits(found, MACHINE)
                    largest = max(largest, found.total())
            shape = domain.observation_shape(level)
            settings = resolve_settings(preset)
            check_hips_memory(lambda settings=settings, shape=shape, domain=domain: HipsModel(
                model_config(settings, shape, domain.num_actions)), settings, shape, memory=MACHINE)  # fmt: skip
    assert largest < 16 * GIB  # with room to spare (11.8 GiB when written: paper, hard CraftWorld, decoded-state)


def test_the_estimate_grows_with_channels_blocks_and_minibatch():
    def total(**network):
        return estimate("sokoban", network=network).total()

    assert total(channels=32) < total(channels=64) < total(channels=128) < total(channels=4096)
    assert total(blocks=1) < total(blocks=2) < total(blocks=8) < total(blocks=64)
    small, large = estimate("boxworld", learner={"minibatch": 64}), estimate("boxworld", learner={"minibatch": 4096})
    assert small.total() < large.total()
    assert "learner.minibatch = 4096" in large.parts[-1].settings

    def subgoal(**sizes):
        return estimate("sokoban", algorithm="phs-sg", subgoal=sizes).total()

    assert subgoal(channels=32) < subgoal(channels=256) and subgoal(blocks=1) < subgoal(blocks=8)
    assert subgoal(vq_channels=32) < subgoal(vq_channels=256) and subgoal(hidden=64) < subgoal(hidden=4096)


def test_search_processes_add_their_copies_unless_they_share_the_evaluator():
    assert search_processes("local", 1, "auto", "cpu", None) == (0, 0)
    assert search_processes("local", 8, "auto", "cpu", None) == (8, 8)
    assert search_processes("local", 8, "shared", "cpu", None) == (8, 0)
    assert search_processes("local", 8, "auto", "cuda", None) == (8, 0)
    assert search_processes("ray", 8, "auto", "cpu", None) == (8, 8)  # a local Ray instance
    assert search_processes("ray", 8, "auto", "cpu", "10.0.0.1:6379") == (0, 0)  # a cluster elsewhere
    domain, level = example("sokoban")
    config = resolve_config("cpu", overrides={"run": {"device": "cpu"}})
    alone = estimate_training_memory(domain, level, config, searches=32)
    pooled = estimate_training_memory(domain, level, config, searches=32, processes=8, copies=8)
    assert pooled.total() - alone.total() == 8 * memory.SEARCH_PROCESS_BYTES + 8 * alone.parameters * 4


def test_building_on_the_meta_device_takes_neither_time_nor_memory():
    """19 G parameters (77 GB of float32) are built on the meta device in well under a second."""
    domain, level = example("sokoban")
    config = resolve_config("cpu", overrides={"run": {"device": "cpu"}, "network": {"channels": 4096, "blocks": 64}})

    def resident() -> int:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) << 10 for line in status if line.startswith("VmRSS"))

    before, peak = resident(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    started = time.perf_counter()
    model = on_meta(lambda: NETWORKS["phs"](domain, level, config))
    found = estimate_training_memory(domain, level, config, searches=32)
    assert time.perf_counter() - started < 5
    assert all(parameter.is_meta for parameter in model.parameters())
    assert found.parameters > 19e9
    assert resident() - before < 256 << 20
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10) - max(peak, before) < 256 << 20
    assert torch.empty(1).device.type == "cpu"  # the default device is back


def test_layer_outputs_count_what_a_forward_pass_produces():
    """The count from the layers' shapes equals the outputs of the convolutions and linear layers
    of a real forward pass (hooks), and the widest of them."""
    network = FlatNetwork(FlatNetworkConfig((5, 7, 9), 4, channels=6, blocks=2, batch_norm=True))
    produced: list[int] = []
    for layer in network.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear, nn.BatchNorm2d)):
            layer.register_forward_hook(lambda _, __, output: produced.append(output[0].numel()))
    network(torch.zeros(3, 5, 7, 9))
    assert layer_outputs(network, 7, 9) == (sum(produced), max(produced))


def test_machine_memory_takes_a_lower_cgroup_limit(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684092 kB\nMemFree:        1 kB\n")
    root = tmp_path / "cgroup"
    (root / "box").mkdir(parents=True)
    (root / "memory.max").write_text("max\n")
    own = tmp_path / "own"
    own.write_text("0::/box\n")
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    monkeypatch.setattr(memory, "CGROUP_ROOT", root)
    monkeypatch.setattr(memory, "OWN_CGROUP", own)
    assert machine_memory() == 24684092 * 1024  # "max": no limit
    (root / "box" / "memory.max").write_text(f"{8 * GIB}\n")
    assert machine_memory() == 8 * GIB
    (root / "box" / "memory.max").write_text(f"{64 * GIB}\n")  # a limit above the machine's memory changes nothing
    assert machine_memory() == 24684092 * 1024


def test_a_gpu_run_is_checked_against_the_gpus_memory():
    """On a GPU the learning state and activations are the GPU's to hold; the checkpoint's copies the machine's."""
    domain, level = example("boxworld")
    config = resolve_config("paper", overrides={"run": {"device": "cpu"}})
    found = dataclasses.replace(estimate_training_memory(domain, level, config, searches=32), device="cuda")
    check_fits(found, MACHINE, gpu_memory=80 * GIB)
    assert found.host_bytes() + found.device_bytes() == found.total() and found.device_bytes() > 0
    with pytest.raises(ConfigError, match=r"more than the GPU's memory \(1\.0 MiB\)"):
        check_fits(found, MACHINE, gpu_memory=1 << 20)


def test_a_hips_refusal_names_the_hips_keys():
    domain, level = example("sokoban")
    shape = domain.observation_shape(level)
    settings = resolve_settings("cpu", overrides={"channels": 4096, "blocks": 64})
    with pytest.raises(ConfigError, match=r"lower hips\.channels = 4096, hips\.blocks = 64"):
        check_hips_memory(lambda: HipsModel(model_config(settings, shape, domain.num_actions)), settings, shape,
                          memory=MACHINE)  # fmt: skip
