"""How close is the memory estimate (`sgps.runs.memory`) to what a run really takes?

``run``: trains with ``sgps train`` in a child process (one process, ``--workers 1``), reads
its peak resident memory (``getrusage``) and prints it beside the estimate of the same run
and the estimate's parts. ``parts``: measures two of the estimate's constants on their own:
the copies the trainer checkpoint holds while it is written, and a learning step's peak
over the layer outputs autograd keeps. Usage::

    python benchmarks/memory.py run --problems sokoban.txt --preset tiny [--config wide.toml] [--max-batches 2]
    python benchmarks/memory.py parts [--learning 32x2x1024,64x6x384,128x1x512]

docs/robustness.md, "Sizes that cannot fit", records the results.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from sgps.domains.levels import read_levels
from sgps.models.flat import FlatNetwork, FlatNetworkConfig
from sgps.runs.memory import BACKWARD_LAYERS, estimate_training_memory, layer_outputs, size_text
from sgps.runs.trainer_state import encode_trainer_state
from sgps.training.config import load_run_config
from sgps.training.methods.flat.learner import FlatLearner, LearnerConfig
from sgps.training.methods.flat.samples import PathSamples

MIB = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="a real run's peak against its estimate")
    run.add_argument("--problems", type=Path, required=True)
    run.add_argument("--preset", default="tiny")
    run.add_argument("--config", type=Path)
    run.add_argument("--max-batches", type=int, default=2)
    parts = commands.add_parser("parts", help="the checkpoint's copies and a learning step's peak")
    parts.add_argument("--learning", default="32x2x1024,64x6x384,128x1x512", help="CHANNELSxBLOCKSxROWS,...")
    one = commands.add_parser("one", help="one measurement of `parts` (each needs a process of its own)")
    one.add_argument("what", help="checkpoint, or CHANNELSxBLOCKSxROWS of a learning step")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    if arguments.command == "run":
        compare_run(arguments.problems, arguments.preset, arguments.config, arguments.max_batches)
    elif arguments.command == "parts":  # a process's peak only rises: one process per measurement
        for what in ["checkpoint", *arguments.learning.split(",")]:
            subprocess.run([sys.executable, __file__, "one", what], check=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    elif arguments.what == "checkpoint":
        checkpoint_copies()
    else:
        channels, blocks, rows = (int(part) for part in arguments.what.split("x"))
        learning_step(channels, blocks, rows)


def compare_run(problems: Path, preset: str, config: Path | None, max_batches: int) -> None:
    """Train in a child process, then print its peak resident memory and the run's estimate."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run"
        command = [sys.executable, "-m", "sgps", "train", "--problems", str(problems), "--out", str(out),
                   "--preset", preset, "--workers", "1", "--quiet", "--max-batches", str(max_batches),
                   *(["--config", str(config)] if config else [])]  # fmt: skip
        started = time.perf_counter()
        subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        settings = load_run_config(out / "config.toml")
        levels = read_levels(problems, settings.run.domain)
        estimate = estimate_training_memory(levels.domain, levels.states()[0], settings,
                                            searches=min(settings.bootstrap.batchlen(levels)))  # fmt: skip
    print(f"{' '.join(command[2:])}: {time.perf_counter() - started:.0f} s")
    print(f"peak resident {peak / MIB:.0f} MiB; estimate {estimate.total() / MIB:.0f} MiB "
          f"({estimate.total() / peak:.2f}x the peak)")  # fmt: skip
    for part in estimate.parts:
        print(f"  {part.what}: {size_text(part.bytes)}")


def resident() -> int:
    """This process's resident memory now, in bytes."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))


def peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def checkpoint_copies(channels: int = 512, blocks: int = 6) -> None:
    """The trainer checkpoint's peak over the resident memory before it, in copies of its 12 bytes a parameter."""
    network = FlatNetwork(FlatNetworkConfig((4, 10, 10), 4, channels=channels, blocks=blocks))
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-3, weight_decay=1e-4)
    for parameter in network.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()  # Adam's moments exist from the first step on
    parameters = sum(parameter.numel() for parameter in network.parameters())
    before = resident()
    encode_trainer_state({"network": network.state_dict(), "optimizer": optimizer.state_dict()})
    copies = (peak() - before) / (12 * parameters)
    print(f"trainer checkpoint, {parameters / 1e6:.1f} M parameters: peak {copies:.2f} x the serialised "
          "weights and moments over the memory before it")  # fmt: skip


def learning_step(channels: int, blocks: int, rows: int, shape: tuple[int, int, int] = (16, 22, 22)) -> None:
    """One flat learning step on `rows` samples (one minibatch): its peak over the memory before it,
    against the layer outputs autograd keeps and against the estimate's count."""
    observations = np.zeros((rows, shape[1], shape[2], shape[0]), np.float32).transpose(0, 3, 1, 2)  # channels-last
    observations[:, 0] = 1

    def samples(count: int) -> PathSamples:
        return PathSamples(observations[:count], np.zeros(count, np.int64), np.ones(count, np.float32),
                           np.ones(count, np.float32))  # fmt: skip

    network = FlatNetwork(FlatNetworkConfig(shape, 4, channels=channels, blocks=blocks))
    learner = FlatLearner(network, LearnerConfig(epochs=1, minibatch=rows), torch.Generator().manual_seed(0))
    learner.update(samples(8))  # kernels loaded, Adam's moments made
    before = resident()
    learner.update(samples(rows))
    kept, widest = layer_outputs(network, shape[1], shape[2])
    measured = (peak() - before) / (kept * rows * 4)
    counted = (kept + BACKWARD_LAYERS * widest) / kept
    print(f"learning step {channels}x{blocks}, {rows} rows: peak {(peak() - before) / MIB:.0f} MiB = {measured:.2f} x "
          f"the layer outputs ({kept * rows * 4 / MIB:.0f} MiB); the estimate counts {counted:.2f} x")  # fmt: skip


if __name__ == "__main__":
    main()
