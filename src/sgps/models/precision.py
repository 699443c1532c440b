"""The number format of network computations: search evaluations (`search.precision`) and
learning steps (`learner.precision`).

- ``float32``: exact single precision everywhere (on a GPU, TF32 tensor cores are switched
  off for the evaluation, so a GPU and a CPU compute the same function up to rounding);
- ``tf32``: on a GPU, convolutions and matrix products in TF32 (10-bit mantissa inputs,
  float32 accumulation); on a CPU the same as float32;
- ``bfloat16``: autocast to bfloat16 (convolutions and matrix products in bf16, reductions
  such as softmax in float32), on a GPU and on CPUs with bf16 units (AVX512-bf16, AMX).

Anything other than float32 changes the numbers the search sees, and so may change the
order of expansions: docs/training.md ("Evaluation precision") records the measured effect.
In a learning step the weights, the optimiser and the losses' reductions stay float32 (autocast
casts only the arithmetic); docs/training.md ("Learning precision") records what it changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

PRECISIONS = ("float32", "tf32", "bfloat16")


def check_precision(precision: str) -> None:
    """A `ValueError` unless `precision` is one of `PRECISIONS`."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")


@contextlib.contextmanager
def number_format(device: torch.device, precision: str, *, exact: bool = True) -> Iterator[None]:
    """Compute inside this block in `precision` on `device` (flags restored on exit). With
    `exact` (search evaluations) float32 switches TF32 off on a GPU, so GPU and CPU searches
    compute the same function; without it (a learning step's computations without gradient)
    float32 leaves PyTorch's defaults, as the learning step always ran."""
    with tf32_switches(device, precision, exact=exact), bf16_casts(device, precision):
        yield


@contextlib.contextmanager
def tf32_switches(device: torch.device, precision: str, *, exact: bool = False) -> Iterator[None]:
    """TF32 on a GPU inside this block: on for ``tf32``; for ``float32`` off with `exact`, else
    PyTorch's defaults left as they are (so a learning step in float32 runs as it always has);
    untouched for ``bfloat16`` and on a CPU. A learning step holds it over forward and backward."""
    check_precision(precision)
    if device.type != "cuda" or precision == "bfloat16" or (precision == "float32" and not exact):
        yield
        return
    switches = _tf32_switches()
    saved = [getattr(owner, name) for owner, name, _, _ in switches]
    for owner, name, on, off in switches:
        setattr(owner, name, on if precision == "tf32" else off)
    try:
        yield
    finally:
        for (owner, name, _, _), value in zip(switches, saved, strict=True):
            setattr(owner, name, value)


def bf16_casts(device: torch.device, precision: str) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast for ``bfloat16``, else nothing. Enter it around a forward computation, not
    around an optimiser step: autocast keeps its bf16 copies of the weights until its
    outermost block exits, so a block spanning an update would go on computing with the
    weights from before it. The backward pass follows the forward's casts by itself."""
    check_precision(precision)
    if precision == "bfloat16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def backpropagated(device: torch.device, precision: str, forward: Callable[[], torch.Tensor]) -> torch.Tensor:
    """The loss `forward()` computes, its gradients accumulated: the forward pass under the bf16
    casts, forward and backward under the TF32 switches, of `precision`."""
    with tf32_switches(device, precision):
        with bf16_casts(device, precision):
            loss = forward()
        loss.backward()
    return loss


def _tf32_switches() -> list[tuple[Any, str, Any, Any]]:
    """(owner, attribute, value for TF32, value for exact float32) of the matrix-product and
    convolution switches: the `fp32_precision` settings where torch has them (reading the
    older `allow_tf32` flags raises once a program has set those), else `allow_tf32`."""
    matmul, conv = torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None)
    if hasattr(matmul, "fp32_precision") and hasattr(conv, "fp32_precision"):
        return [(matmul, "fp32_precision", "tf32", "ieee"), (conv, "fp32_precision", "tf32", "ieee")]
    return [(matmul, "allow_tf32", True, False), (torch.backends.cudnn, "allow_tf32", True, False)]

