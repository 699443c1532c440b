"""Network checkpoints: safetensors files written atomically, checked on load.

A checkpoint stores the network's tensors and, in the safetensors metadata, the
network's architecture (its config as JSON). Loading refuses a file saved from
another architecture, or a damaged file, with a `CheckpointError` naming the file
and the problem; nothing is unpickled, so loading is safe.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors import SafetensorError
from safetensors.torch import load, save

from sgps.errors import CheckpointError
from sgps.fileio import atomic_write_bytes

ARCHITECTURE_KEY = "sgps.architecture"


class ConfiguredModule(Protocol):
    """A torch module that keeps its architecture in a dataclass `config` (every sgps network)."""

    config: Any

    def state_dict(self) -> dict[str, torch.Tensor]: ...

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> Any: ...

    def parameters(self) -> Any: ...


def architecture(network: ConfiguredModule) -> str:
    """The canonical JSON description of `network`'s architecture."""
    return json.dumps({"class": type(network).__name__, **dataclasses.asdict(network.config)}, sort_keys=True)


def save_checkpoint(path: str | Path, network: ConfiguredModule, metadata: dict[str, str] | None = None) -> None:
    """Write `network`'s tensors and architecture to `path` (temporary file, then rename)."""
    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in network.state_dict().items()}
    data = save(tensors, metadata={**(metadata or {}), ARCHITECTURE_KEY: architecture(network)})
    atomic_write_bytes(path, data)


def load_checkpoint(path: str | Path, network: ConfiguredModule) -> dict[str, str]:
    """Load the tensors at `path` into `network`; return the checkpoint's metadata."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{file}: no such checkpoint file") from None
    except OSError as error:
        raise CheckpointError(f"{file}: cannot read the checkpoint ({error.strerror})") from None
    try:
        tensors = load(data)
        metadata = _metadata(data)
    except (SafetensorError, ValueError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{file}: not a readable sgps checkpoint (corrupted or truncated: {error})") from None
    saved = metadata.get(ARCHITECTURE_KEY)
    expected = architecture(network)
    if saved is None:
        raise CheckpointError(f"{file}: the checkpoint does not record its architecture; it was not written by sgps")
    if saved != expected:
        raise CheckpointError(f"{file}: saved from another architecture ({_difference(saved, expected)})")
    try:
        network.load_state_dict({name: tensor.to(_device(network)) for name, tensor in tensors.items()})
    except RuntimeError as error:
        raise CheckpointError(f"{file}: tensors do not fit the network ({error})") from None
    return metadata


def _metadata(data: bytes) -> dict[str, str]:
    """The `__metadata__` of a safetensors byte string (8-byte header length, then JSON)."""
    if len(data) < 8:
        raise ValueError("file shorter than a safetensors header")
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    return dict(header.get("__metadata__", {}))


def _difference(saved: str, expected: str) -> str:
    ours, theirs = json.loads(expected), json.loads(saved)
    changed = [
        f"{key}: file {theirs.get(key)!r}, network {ours.get(key)!r}" for key in ours if ours[key] != theirs.get(key)
    ]
    return "; ".join(changed) or "unrecognised fields"


def _device(network: ConfiguredModule) -> torch.device:
    return next(network.parameters()).device
