"""The trainer checkpoint, ``RUN/checkpoints/trainer.pt``: written with a digest, read back checked.

It holds everything a run needs to resume exactly (`sgps.training.bootstrap.Bootstrap.checkpoint`,
written by `sgps.runs.rundir.RunDirectory.save_checkpoint`: loop state, optimisers, generators,
CSV row counts). A flipped byte in an optimiser's
moments would otherwise resume silently with a changed value, so the file is
``torch.save({"format": 2, "sha256": HEX, "payload": BYTES})``, BYTES being the
``torch.save`` of the state and HEX its SHA-256, checked before the state is unpickled
(``weights_only=True``: plain data and tensors, nothing executed). Files written before
the digest (the state itself at the top level) are read as they are.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path
from typing import Any

import torch

from sgps.errors import CheckpointError
from sgps.models.checkpoint import read_bounded

#: The largest trainer checkpoint accepted (optimisers and buffers of the largest networks fit well below).
TRAINER_STATE_LIMIT = 4 << 30
FORMAT = 2


def encode_trainer_state(state: dict[str, Any]) -> bytes:
    """The bytes of trainer.pt for `state`: its serialisation wrapped with its SHA-256 digest."""
    inner = io.BytesIO()
    torch.save(state, inner)
    data = inner.getvalue()
    outer = io.BytesIO()
    wrapped = {"format": FORMAT, "sha256": hashlib.sha256(data).hexdigest(),
               "payload": torch.frombuffer(bytearray(data), dtype=torch.uint8)}  # fmt: skip
    torch.save(wrapped, outer)
    return outer.getvalue()


def read_trainer_state(path: Path) -> dict[str, Any]:
    """The state saved in trainer.pt at `path`, its digest checked; `CheckpointError` naming the file otherwise."""
    return decode_trainer_state(read_bounded(path, TRAINER_STATE_LIMIT, "trainer checkpoint"), path)


def decode_trainer_state(data: bytes, path: Path) -> dict[str, Any]:
    """The state in the bytes `data` of a trainer.pt (read from `path`, which errors name), its digest checked."""
    outer = _load(path, data)
    if not isinstance(outer, dict) or outer.get("format") != FORMAT:
        return outer  # written before the digest: the state itself (its entries are checked by the caller)
    payload, digest = outer.get("payload"), outer.get("sha256")
    if not isinstance(payload, torch.Tensor) or payload.dtype != torch.uint8 or not isinstance(digest, str):
        raise _damaged(path, "its digest or payload is missing")
    data = payload.numpy().tobytes()
    if hashlib.sha256(data).hexdigest() != digest:
        raise _damaged(path, "its SHA-256 digest does not match its contents")
    return _load(path, data)


def _load(path: Path, data: bytes) -> Any:
    """Unpickle `data` safely, every tensor on the CPU.

    A run trained on a GPU saves its optimiser state on that GPU; mapping it to the CPU
    lets the run resume on a machine without one (the method moves what it loads to the
    run's device).
    """
    try:
        with warnings.catch_warnings():  # torch's warnings about foreign files are not for users
            warnings.simplefilter("ignore")
            return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception:  # torch's own text suggests unsafe loading: never show it
        raise _damaged(path, "not written by sgps, or cut short") from None


def _damaged(path: Path, detail: str) -> CheckpointError:
    return CheckpointError(
        f"{path}: not a readable trainer checkpoint ({detail}); resume from a copy of the run, "
        "or start it again with --overwrite"
    )
