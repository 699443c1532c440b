"""The arithmetic of one evaluation: floating-point operations per state, counted, not timed.

`sgps compare` compares methods at equal training expansions, so what an expansion costs
decides how a comparison reads on the wall clock. The paper matches its networks so that a
π^SG evaluation costs about what a flat one does (flat: 128 channels x 8 blocks; each π^SG
network half the blocks, π_unc + h also half the channels; spec/algorithms.md 2.1, 3.5).
The count (`torch.utils.flop_counter`) is exact and the same on every machine, which makes
it the check of the presets' sizes (docs/subgoals.md, "Compute-matched π^SG").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode


def flops_per_state(evaluate: Callable[[Sequence[Any]], Any], states: Sequence[Any]) -> float:
    """Floating-point operations of one call `evaluate(states)`, per state.

    `evaluate` is anything that answers the search engine's requests (an evaluator, or a
    network on a batch of observations); only PyTorch operations are counted.
    """
    if not len(states):
        raise ValueError("states must not be empty")
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        evaluate(states)
    return counter.get_total_flops() / len(states)
