"""Sizes that cannot fit: a training run's peak memory, estimated before anything is written.

A run whose networks cannot fit in memory used to start, create its run folder, and
then grow until the kernel killed it (exit -9, no message): ``[network] channels = 4096,
blocks = 64`` (both within the schema's ranges) made ``sgps train`` reach 22 GB on a
24 GiB machine. `check_training_memory` refuses such a run with a `ConfigError` before
its folder is created, naming the estimate, the machine's memory, and the settings to lower.

The estimate builds the run's networks exactly as training does (`sgps.training.setup.NETWORKS`)
but on torch's meta device, which records shapes and allocates nothing (the 19 G parameters
of 4096 x 64 are built in well under a second), and adds up, in float32 bytes:

- the training process's parameters four times: weights, gradients, Adam's two moments
  (the weights and the optimiser stay float32 whatever `learner.precision` says:
  `sgps.models.precision`);
- the trainer checkpoint written after every batch (`sgps.runs.trainer_state`): it
  serialises weights and moments (12 bytes a parameter) and holds three copies of those
  bytes while it wraps them with their digest (measured, see below);
- the activations autograd keeps in the largest learning step: the rows of its minibatch
  times the outputs of every layer the step runs (`layer_outputs`), and `BACKWARD_LAYERS`
  outputs of its widest layer for the backward pass's own tensors; each network of π^SG learns
  in its own steps, so the largest of them counts;
- the largest evaluation of the searches: a Bootstrap batch of searches in lockstep, each
  asking for up to `evaluation_batch + |A| - 1` rows, through the widest layer (inference
  keeps no activations, only `INFERENCE_TENSORS` layer outputs at a time);
- every search process on this machine (`run.workers`): an interpreter with torch, and,
  unless the searches share the training process's evaluator, a copy of the weights;
- the training process itself (interpreter, torch, the problems).

Learning and evaluation take turns in the training process, so the larger of the two
counts; the checkpoint's copies are added to them (they come between, so this overcounts).
On a GPU the parameters, activations and evaluations are the GPU's to hold: they are
checked against its memory, the rest against the machine's.

The estimate is meant to be an upper bound (a refused run could never have finished) that
still lets every preset run: `tiny`, `cpu` and `paper` on every domain need at most 12 GiB
even with 16 search processes. Calibrated on 2026-11-27 on a 2-core AMD EPYC with 24 GiB:
a π^SG run of 35 M parameters peaked at 2.13 GiB against 2.49 GiB estimated
(docs/robustness.md, "Sizes that cannot fit", has the commands and the numbers).

The search trees grow with the budget, so they are not checked before a run but planned as
it goes: `concurrent_searches` says how many searches of a budget may run at once, and a
test round (`sgps.runs.testing`) searches its levels that many at a time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sgps.errors import ConfigError
from sgps.training.config import TrainConfig
from sgps.training.methods.hips.learner import TRAJECTORIES_PER_UPDATE
from sgps.training.setup import NETWORKS, SUBGOAL_COSTS, evaluator_place

#: Bytes of a float32: the weights, gradients and moments, and (counted so even under bf16
#: autocast, which keeps float32 copies of what it casts) the activations.
FLOAT_BYTES = 4
#: Weights, gradients and Adam's two moments of every parameter the training process learns.
LEARNING_BYTES_PER_PARAMETER = 4 * FLOAT_BYTES
#: The trainer checkpoint's extra memory while it is written: weights and moments serialised
#: (3 x 4 bytes a parameter), held three times at once (the serialisation, its copy as a
#: tensor and the digest-wrapped file: measured 3.00 x with a 28 M-parameter network).
CHECKPOINT_BYTES_PER_PARAMETER = 3 * 3 * FLOAT_BYTES
#: A learning step's memory beyond the layer outputs autograd keeps, in outputs of its widest
#: layer: the backward pass's gradients of a layer or two, layout copies and scratch space
#: (measured 2.1-2.6 with flat networks of 1 to 6 blocks: docs/robustness.md).
BACKWARD_LAYERS = 4
#: Layer outputs an evaluation (inference mode, nothing kept) holds at once: a residual
#: block's input, its two convolutions' outputs, and a layout copy.
INFERENCE_TENSORS = 4
#: The training process without its networks: the interpreter, torch, sgps, the problems.
PROCESS_BYTES = 768 << 20
#: A search process without its model copy (spawned: an interpreter importing torch and sgps).
SEARCH_PROCESS_BYTES = 384 << 20
#: Bytes a search tree holds per expansion, to plan how many searches run at once. Measured
#: 2026-12-04 as the growth of the peak resident memory while PHS*(π) (the hard BoulderDash
#: campaign's network, `cpu` preset) searched the first official hard test levels unsolved:
#: 1,281 bytes an expansion at 120,000 expansions (1,133 a generated node, 1.13 generated an
#: expansion) and 1,398 over three searches of 40,000 (1.30 generated an expansion). Test
#: searches of hard BoulderDash by π^SG generate up to 2.1 nodes an expansion, so 2.5 KiB.
TREE_BYTES_PER_EXPANSION = 2560
#: The share of the machine's memory that the trees of searches running at once may take.
SEARCH_TREES_SHARE = 0.5
#: Where Linux says how much memory the machine has, and where a cgroup may say less: its limit
#: file (v2: memory.max, v1: memory.limit_in_bytes) at the root of a container's cgroup folder,
#: or in the folder /proc/self/cgroup names.
MEMINFO = Path("/proc/meminfo")
CGROUP_ROOT = Path("/sys/fs/cgroup")
OWN_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class Part:
    """One term of the estimate: its bytes, what it is, and the settings that make it smaller."""

    what: str
    bytes: int
    settings: tuple[str, ...]
    on_device: bool = False  # held on the run's GPU (when it has one) rather than in the machine's memory


@dataclass(frozen=True)
class MemoryEstimate:
    """A run's estimated peak memory, as the parts that add up to it."""

    parameters: int
    parts: tuple[Part, ...]
    device: str = "cpu"

    def host_bytes(self) -> int:
        """Bytes the machine's memory must hold (everything, for a run on the CPU)."""
        return sum(part.bytes for part in self.parts if not (part.on_device and self.device == "cuda"))

    def device_bytes(self) -> int:
        """Bytes the GPU must hold (0 for a run on the CPU)."""
        return sum(part.bytes for part in self.parts if part.on_device and self.device == "cuda")

    def total(self) -> int:
        return sum(part.bytes for part in self.parts)


@dataclass(frozen=True)
class Pass:
    """A forward pass through some of a model's networks, each `(module, rows it reads per row of the pass)`.

    `rows`: the rows of the pass (a minibatch, the searches' evaluation rows); a module
    may read several per row (π^SG reads each state with each of its K codes).
    `settings`: what sets `rows`, with their values, for the refusal's advice.
    """

    what: str
    rows: int
    modules: tuple[tuple[nn.Module, int], ...]
    settings: tuple[str, ...]
    learning: bool = True  # False: an evaluation, in inference mode


def machine_memory() -> int:
    """Bytes of physical memory this process may use: MemTotal of /proc/meminfo (else the
    page count of `os.sysconf`), less where a cgroup's memory limit is lower."""
    total = 0
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        total = 0
    if not total:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            total = 0
    limits = [limit for limit in (_cgroup_limit(path) for path in cgroup_limit_files()) if limit]
    if limits:
        total = min([total, *limits]) if total else min(limits)
    return total


def concurrent_searches(budget: int, memory: int | None = None) -> int:
    """How many searches of up to `budget` expansions may run at once, over all search processes:
    as many as `TREE_BYTES_PER_EXPANSION` says fit in `SEARCH_TREES_SHARE` of `memory` (default:
    this machine's, `machine_memory`), and at least one.

    A test round searches its unsolved levels in lockstep; at the paper's cap of 512,000
    expansions a hard BoulderDash level's tree takes about 650 MB, so the 100 hard test levels
    of a model that solves none would need about 65 GB at once. With 24 GiB this allows 9."""
    memory = machine_memory() if memory is None else memory
    if memory <= 0:
        return 1
    return max(1, int(memory * SEARCH_TREES_SHARE) // (max(budget, 1) * TREE_BYTES_PER_EXPANSION))


def searches_in_step(workers: int, budget: int, memory: int | None = None) -> int:
    """`concurrent_searches` for searches dealt to `workers` search processes: rounded down to a
    multiple of `workers` where at least that many fit, so that no process idles while the others
    finish equal shares (a test's unsolved levels all search to the budget)."""
    fit = concurrent_searches(budget, memory)
    return fit if fit < workers else fit - fit % workers


def cgroup_limit_files() -> list[Path]:
    """The files where a cgroup may limit this process's memory (absent ones included)."""
    files = [CGROUP_ROOT / "memory.max", CGROUP_ROOT / "memory" / "memory.limit_in_bytes"]
    try:
        lines = OWN_CGROUP.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        relative = path.strip().lstrip("/")
        if not relative:
            continue
        if controllers == "":
            files.append(CGROUP_ROOT / relative / "memory.max")
        elif "memory" in controllers.split(","):
            files.append(CGROUP_ROOT / "memory" / relative / "memory.limit_in_bytes")
    return files


def _cgroup_limit(path: Path) -> int | None:
    """A cgroup's memory limit in bytes, or None where the file is absent or says there is none."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit() or int(text) >= 1 << 60:  # "max" (v2), or v1's "no limit" near 2**63
        return None
    return int(text)


def layer_outputs(module: nn.Module, height: int, width: int) -> tuple[int, int]:
    """(all, largest) output elements of `module`'s layers for one input row of `height` x `width` cells.

    Autograd keeps about one tensor per layer for the backward pass (the ReLUs and residual
    sums work in place), so `all` sizes a learning step's activations; an evaluation holds a
    few layers' outputs at once, so `largest` sizes it. Counted from the layers' shapes:
    nothing runs, and a module on the meta device will do.
    """
    total = largest = 0
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d):
            out = layer.out_channels * _conv_side(layer, 0, height) * _conv_side(layer, 1, width)
        elif isinstance(layer, nn.Linear):
            out = layer.out_features
        elif isinstance(layer, nn.BatchNorm2d):
            out = layer.num_features * height * width
        else:
            continue
        total += out
        largest = max(largest, out)
    return total, largest


def _conv_side(layer: nn.Conv2d, axis: int, size: int) -> int:
    """The output size of `layer` along `axis` for an input of `size` cells (the project's convolutions keep it)."""
    if isinstance(layer.padding, str):
        return size  # "same" ("valid" is never used here: counting it as "same" only overestimates)
    kernel, stride = layer.kernel_size[axis], layer.stride[axis]
    padding, dilation = layer.padding[axis], layer.dilation[axis]
    return max(1, (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1)


def pass_bytes(step: Pass, height: int, width: int) -> int:
    """Bytes of a learning step's activations (every layer output kept, and `BACKWARD_LAYERS` of
    the widest) or of an evaluation's (`INFERENCE_TENSORS` of the widest layer's outputs)."""
    counts = [(layer_outputs(module, height, width), each) for module, each in step.modules]
    widest = max((largest * each for (_, largest), each in counts), default=0)
    if step.learning:
        kept = sum(total * each for (total, _), each in counts)
        return (kept + BACKWARD_LAYERS * widest) * step.rows * FLOAT_BYTES
    return INFERENCE_TENSORS * widest * step.rows * FLOAT_BYTES


def on_meta(build: Callable[[], nn.Module]) -> nn.Module:
    """`build()` on torch's meta device: the module's shapes without any of its memory, in no time."""
    with torch.device("meta"):
        return build()


def parameter_count(module: nn.Module) -> int:
    """Parameters and buffers (the codebook's statistics, batch norm's) of `module`."""
    return sum(t.numel() for t in module.parameters()) + sum(t.numel() for t in module.buffers())


def bootstrap_passes(model: nn.Module, config: TrainConfig, searches: int, num_actions: int) -> tuple[list[Pass], Pass]:
    """(the learning steps, the largest evaluation) of a Bootstrap run's `model` (`NETWORKS`).

    Flat: one network learns on `learner.minibatch` rows. π^SG: the VQ-VAE on
    `subgoal.vq_minibatch` pairs, then π_hi, π_low and π_unc + h each on `learner.minibatch`
    states, in steps of their own (`sgps.training.methods.subgoal.learner`); π_hi reads every
    state with each of the K codes, through its MLP (code-vector conditioning) or its whole
    network (decoded-state, which decodes the K subgoals first). An evaluation reads
    `searches` x (`search.evaluation_batch` + |A| - 1) states: what `searches` lockstep
    searches ask for at most in one round (`sgps.execution.pool.request_rows`).
    """
    rows = searches * (config.search.evaluation_batch + num_actions - 1)
    evaluated = (f"search.evaluation_batch = {config.search.evaluation_batch}",
                 f"bootstrap.batch_size = {config.bootstrap.batch_size}")  # fmt: skip
    minibatch = config.learner.minibatch
    settings = (f"learner.minibatch = {minibatch}",)
    if config.run.algorithm not in SUBGOAL_COSTS:
        learning = [Pass("a learning minibatch", minibatch, ((model, 1),), settings)]
        return learning, Pass("the searches' evaluations", rows, ((model, 1),), evaluated, learning=False)
    codes = config.subgoal.codebook_size
    high: tuple[tuple[nn.Module, int], ...]
    if config.subgoal.conditioning == "decoded-state":
        high = ((model.high, codes),)
        read = ((model.vqvae, codes), (model.high, codes), (model.low, codes))
    else:
        high = ((model.high.trunk, 1), (model.high.reduce, 1), (model.high.mlp, codes))
        read = (*high, (model.low.trunk, 1), (model.low.reduce, 1), (model.low.mlp, codes))
    vq_minibatch = config.subgoal.vq_minibatch
    learning = [
        Pass("a VQ-VAE minibatch", vq_minibatch, ((model.vqvae, 1),), (f"subgoal.vq_minibatch = {vq_minibatch}",)),
        Pass("a π_hi minibatch", minibatch, high, settings),
        Pass("a π_low minibatch", minibatch, ((model.low, 1),), settings),
        Pass("a π_unc + h minibatch", minibatch, ((model.unconditional, 1),), settings),
    ]
    return learning, Pass("the searches' evaluations", rows, (*read, (model.unconditional, 1)), evaluated,
                          learning=False)


def hips_passes(model: nn.Module, minibatch: int, horizon: int, trajectories: int) -> list[Pass]:
    """The learning steps of HIPS-ε's five networks (`sgps.training.methods.hips.learner`), each on
    `hips.minibatch` rows, and one step of its segment detector: `trajectories` x `horizon` rows.

    The detector's REINFORCE update keeps the graph of every step of its trajectories until
    they end, so its real peak grows with their length, which is only known once the dataset
    is solved; one step is counted.
    """
    settings = (f"hips.minibatch = {minibatch}",)
    learning = [Pass(f"a {name} minibatch", minibatch, ((getattr(model, name), 1),), settings)
                for name in ("low", "generator", "prior", "distance")]  # fmt: skip
    detector = (f"hips.horizon = {horizon}",)
    return [*learning, Pass("a detector step", trajectories, ((model.detector, horizon),), detector)]


#: The settings that size each network of a method (the refusal names those of the largest first).
SIZE_SETTINGS = {
    "flat": ("network.channels", "network.blocks"),
    "vqvae": ("subgoal.vq_channels", "subgoal.vq_blocks", "subgoal.code_dim"),
    "high": ("subgoal.channels", "subgoal.blocks", "subgoal.hidden"),
    "low": ("subgoal.channels", "subgoal.blocks", "subgoal.hidden"),
    "unconditional": ("subgoal.unconditional_channels", "subgoal.unconditional_blocks"),
    # HIPS-ε (`sgps.models.hips.HipsModel`)
    "generator": ("hips.vq_channels", "hips.vq_blocks", "hips.code_dim"),
    "detector": ("hips.channels", "hips.blocks"),
    "prior": ("hips.channels", "hips.blocks"),
    "distance": ("hips.channels", "hips.blocks"),
}
HIPS_LOW = ("hips.channels", "hips.blocks")


def size_settings(model: nn.Module, value: Callable[[str], Any], hips: bool = False) -> tuple[str, ...]:
    """The settings that size the networks holding `model`'s parameters (each a tenth of them or more),
    with their values (`value(setting)`), those of the largest network first."""
    table = {**SIZE_SETTINGS, "low": HIPS_LOW} if hips else SIZE_SETTINGS
    children = sorted(((parameter_count(child), name) for name, child in model.named_children() if name in table),
                      reverse=True)  # fmt: skip
    total = sum(count for count, _ in children)
    ordered = [name for count, name in children if count * 10 >= total] or ["flat"]
    names = dict.fromkeys(setting for name in ordered for setting in table[name])
    return tuple(f"{setting} = {value(setting)}" for setting in names)


def _config_value(config: Any) -> Callable[[str], Any]:
    """`section.key` -> its value in `config` (a `TrainConfig`, or HIPS-ε's settings for ``hips.*``)."""

    def value(setting: str) -> Any:
        section, key = setting.split(".")
        return getattr(config if section == "hips" else getattr(config, section), key)

    return value


def search_processes(
    executor: str, workers: int, evaluator: str, device_type: str, ray_address: str | None
) -> tuple[int, int]:
    """(search processes on this machine, how many of them hold a copy of the model).

    Local processes copy the model unless they share the training process's evaluator
    (`sgps.execution.placement.search_pool`); the Ray actors of a local instance copy it too,
    those of a cluster at `ray_address` run elsewhere and are not this machine's to hold.
    """
    if executor == "ray":
        return (workers, workers) if ray_address is None else (0, 0)
    if workers <= 1:
        return 0, 0
    return workers, 0 if evaluator_place(evaluator, device_type) == "shared" else workers


def estimate_training_memory(
    domain: Any,
    example: Any,
    config: TrainConfig,
    *,
    searches: int,
    processes: int = 0,
    copies: int = 0,
    device: str = "cpu",
) -> MemoryEstimate:
    """The peak memory of a Bootstrap run of `config` (resolved: `run.workers` and
    `search.evaluation_batch` as the run will use them) on levels shaped like `example`.

    `searches`: searches of one lockstep round (the batch size, or fewer problems);
    `processes`, `copies`: search processes on this machine, and those with a model copy
    (`search_processes`); `device`: where the networks learn (``cpu`` or ``cuda``).
    """
    model = on_meta(lambda: NETWORKS[config.run.algorithm](domain, example, config))
    _, height, width = domain.observation_shape(example)
    learning, evaluation = bootstrap_passes(model, config, searches, domain.num_actions)
    sizes = size_settings(model, _config_value(config))
    return model_estimate(model, [*learning, evaluation], height, width, sizes, processes, copies, device)


def model_estimate(
    model: nn.Module,
    passes: Sequence[Pass],
    height: int,
    width: int,
    sizes: tuple[str, ...],
    processes: int = 0,
    copies: int = 0,
    device: str = "cpu",
    checkpoint: int = CHECKPOINT_BYTES_PER_PARAMETER,
) -> MemoryEstimate:
    """The parts of the estimate (`MemoryEstimate`) of `model` (built on the meta device) learning
    and evaluating in `passes`; `checkpoint`: bytes a parameter takes while its checkpoints are written."""
    parameters = parameter_count(model)
    count = f"{parameters / 1e9:.2f} G" if parameters >= 1e8 else f"{parameters / 1e6:.2f} M"
    learned = f"{count} parameters with their gradients and Adam moments"
    parts = [
        Part(learned, parameters * LEARNING_BYTES_PER_PARAMETER, sizes, on_device=True),
        Part("writing its checkpoints", parameters * checkpoint, sizes),
        Part("the training process itself", PROCESS_BYTES, ()),
    ]
    if passes:  # learning and evaluating take turns in the training process: the largest step counts
        sized = [(pass_bytes(step, height, width), step) for step in passes]
        largest, step = max(sized, key=lambda item: item[0])
        parts.append(Part(f"activations of {step.what} ({step.rows} rows)", largest, step.settings, on_device=True))
    if processes:
        copied = f" with {copies} copies of the weights" if copies else ""
        parts.append(Part(f"{processes} search processes{copied}",
                          SEARCH_PROCESS_BYTES * processes + copies * parameters * FLOAT_BYTES,
                          (f"run.workers = {processes}",)))  # fmt: skip
    return MemoryEstimate(parameters, tuple(parts), device)


def check_fits(estimate: MemoryEstimate, memory: int | None = None, gpu_memory: int | None = None) -> None:
    """Refuse (`ConfigError`) a run whose estimate exceeds the machine's memory (`memory`, by
    default `machine_memory`), or, for a GPU run, whose networks exceed the GPU's (`gpu_memory`,
    by default the current device's); the message names the estimate, the memory, the parts
    largest first, and the settings of the largest parts: what to lower."""
    memory = machine_memory() if memory is None else memory
    checks = [(estimate.host_bytes(), memory, "this machine's memory", False)]
    if estimate.device == "cuda":
        if gpu_memory is None:
            gpu_memory = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        checks.append((estimate.device_bytes(), gpu_memory, "the GPU's memory", True))
    for needed, available, where, on_device in checks:
        if not available or needed <= available:
            continue
        parts = sorted((part for part in estimate.parts if part.on_device == on_device or estimate.device != "cuda"),
                       key=lambda part: part.bytes, reverse=True)  # fmt: skip
        listed = "; ".join(f"{part.what}: {size_text(part.bytes)}" for part in parts if part.bytes)
        lower = [setting for part in parts if part.bytes * 4 >= needed for setting in part.settings]
        settings = ", ".join(dict.fromkeys(lower)) or "the network sizes"
        raise ConfigError(f"this run needs about {size_text(needed)} of memory at its peak, more than {where} "
                          f"({size_text(available)}): {listed}; lower {settings}")  # fmt: skip


def size_text(count: int) -> str:
    """Bytes in the largest binary unit that leaves at least 1 (GiB, TiB...), one decimal."""
    value, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            break
        value /= 1024
    return f"{value:.1f} {unit}" if unit != "B" else f"{count} B"


def check_training_memory(
    domain: Any,
    example: Any,
    config: TrainConfig,
    train_count: int,
    *,
    executor: str = "local",
    ray_address: str | None = None,
    device: str = "cpu",
    memory: int | None = None,
) -> MemoryEstimate:
    """`estimate_training_memory` of a run about to start (or resume), refused by `check_fits`
    when it cannot fit; the estimate otherwise. Called by `sgps.runs.runner.train` before
    the networks are built and the run folder is created. `memory`: as `check_fits`."""
    processes, copies = search_processes(executor, config.run.workers, config.run.evaluator, device, ray_address)
    estimate = estimate_training_memory(domain, example, config, searches=min(config.bootstrap.batch_size,
                                        train_count), processes=processes, copies=copies, device=device)  # fmt: skip
    check_fits(estimate, memory)
    return estimate


def check_hips_memory(
    build: Callable[[], nn.Module],
    settings: Any,
    observation_shape: tuple[int, int, int],
    device: str = "cpu",
    memory: int | None = None,
) -> MemoryEstimate:
    """Refuse (`check_fits`) HIPS-ε networks that cannot fit; the estimate otherwise.

    `build`: HIPS-ε's five networks as its trainer builds them (`HipsModel`), built here on the
    meta device; `settings`: its `HipsSettings`. It learns offline, in this process, one network
    at a time on `hips.minibatch` rows (`hips_passes`), with an optimiser for each, and saves
    only its weights, so its checkpoint takes 4 bytes a parameter. `memory`: as `check_fits`.
    """
    model = on_meta(build)
    _, height, width = observation_shape
    passes = hips_passes(model, settings.minibatch, settings.horizon, TRAJECTORIES_PER_UPDATE)
    sizes = size_settings(model, _config_value(settings), hips=True)
    estimate = model_estimate(model, passes, height, width, sizes, device=device, checkpoint=FLOAT_BYTES)
    check_fits(estimate, memory)
    return estimate
