"""Network checkpoints: safetensors files written atomically, checked on load.

A checkpoint stores the network's tensors and, in the safetensors metadata, the
network's architecture (its config as JSON), the format version, the sgps version and
a SHA-256 checksum of the tensors. Loading refuses, with a `CheckpointError` naming
the file and the problem: anything but a regular file, a file larger than the network
could need, a file saved from another architecture, tensors of another shape or data
type, non-finite weights, and any byte changed since it was written. Nothing is
unpickled, so loading is safe.

A checkpoint may store its float32 tensors rounded to bfloat16 (`round_checkpoint`, its
metadata saying so): half the bytes, for weights shipped in the package. Loading widens
them back to the network's float32, so such a file searches as the rounded weights do,
not as the float32 ones it was rounded from: it names other weights (another checksum)
and is tested as such.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import stat
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors import SafetensorError
from safetensors.torch import load, save

from sgps.errors import CheckpointError
from sgps.fileio import atomic_write_bytes, file_sha256, parse_json
from sgps.version import sgps_version

ARCHITECTURE_KEY = "sgps.architecture"
SEARCH_KEY = "sgps.search"
CHECKSUM_KEY = "sgps.checksum"
FORMAT_KEY = "sgps.format"
VERSION_KEY = "sgps.version"
#: The narrower type a checkpoint stores its float32 tensors in (absent: as the network holds them).
STORED_PRECISION_KEY = "sgps.stored_precision"
#: The checksum of the float32 tensors a rounded checkpoint was rounded from (the weights trained).
ROUNDED_FROM_KEY = "sgps.rounded_from"
#: The narrower types a checkpoint may store float32 tensors in, by the name its metadata gives.
STORED_PRECISIONS = {"bfloat16": torch.bfloat16}
FORMAT_VERSION = "1"
#: Room for the safetensors header on top of the tensors' own bytes.
HEADER_ALLOWANCE = 1 << 20


class ConfiguredModule(Protocol):
    """A torch module that keeps its architecture in a dataclass `config` (every sgps network)."""

    config: Any

    def state_dict(self) -> dict[str, torch.Tensor]: ...

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> Any: ...

    def parameters(self) -> Any: ...


def architecture(network: ConfiguredModule) -> str:
    """The canonical JSON description of `network`'s architecture.

    A config field marked ``omit_when_default`` in its metadata (one added after
    checkpoints were written, whose default builds the network those checkpoints hold)
    is left out while it has its default, so that those checkpoints still load.
    """
    config = network.config
    fields = dataclasses.asdict(config)
    for field in dataclasses.fields(config):
        if field.metadata.get("omit_when_default") and getattr(config, field.name) == field.default:
            del fields[field.name]
    return json.dumps({"class": type(network).__name__, **fields}, sort_keys=True)


def recorded_architecture(path: str | Path) -> dict[str, Any]:
    """The architecture fields a checkpoint records, read from its header before a network is built for it."""
    file = Path(path)
    try:
        described = parse_json(_header_metadata(file)[ARCHITECTURE_KEY])
    except (KeyError, ValueError) as error:
        raise CheckpointError(f"{file}: not a readable sgps checkpoint ({error})") from None
    if not isinstance(described, dict):
        raise CheckpointError(f"{file}: not a readable sgps checkpoint (its architecture is not a table)")
    return described


def weights_digest(path: str | Path) -> str:
    """What names the weights in the checkpoint at `path`, so that a result can say which it came from.

    The SHA-256 of its tensors that sgps wrote into its metadata (`checksum`: read from the
    header alone, and unchanged by a rewrite of the same tensors), or, for a file without
    one, the SHA-256 of the file's bytes. A `CheckpointError` names a file that cannot be read.
    """
    file = Path(path)
    try:
        recorded = _header_metadata(file).get(CHECKSUM_KEY, "")
    except ValueError as error:
        raise CheckpointError(f"{file}: not a readable sgps checkpoint ({error})") from None
    if isinstance(recorded, str) and re.fullmatch(r"[0-9a-f]{64}", recorded):
        return recorded
    try:
        return file_sha256(file).hex()
    except OSError as error:
        raise CheckpointError(f"{file}: cannot read the checkpoint ({error.strerror})") from None


def stored_precision(path: str | Path) -> tuple[str, str | None]:
    """The type the checkpoint at `path` stores its float32 tensors in ("float32", or the narrower
    one `round_checkpoint` rounded them to) and, when rounded, the checksum of the float32 weights
    it was rounded from; read from the header alone."""
    file = Path(path)
    try:
        metadata = _header_metadata(file)
    except ValueError as error:
        raise CheckpointError(f"{file}: not a readable sgps checkpoint ({error})") from None
    return metadata.get(STORED_PRECISION_KEY, "float32"), metadata.get(ROUNDED_FROM_KEY)


def _header_metadata(file: Path) -> dict[str, str]:
    """The metadata of the safetensors file `file`, read from its header alone (ValueError: no header)."""
    if file.exists() and not file.is_file():
        raise CheckpointError(f"{file}: not a regular file; a checkpoint must be a plain file")
    try:
        with open(file, "rb") as handle:
            head = handle.read(8)
            size = int.from_bytes(head, "little") if len(head) == 8 else -1
            if not 0 < size <= HEADER_ALLOWANCE:
                raise ValueError("no safetensors header")
            return _metadata(head + handle.read(size))
    except FileNotFoundError:
        raise CheckpointError(f"{file}: no such checkpoint file") from None
    except OSError as error:
        raise CheckpointError(f"{file}: cannot read the checkpoint ({error.strerror})") from None


def checksum(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the tensors' names, data types, shapes and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def save_checkpoint(path: str | Path, network: ConfiguredModule, metadata: dict[str, str] | None = None) -> None:
    """Write `network`'s tensors, architecture and checksum to `path` (temporary file, then rename)."""
    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in network.state_dict().items()}
    described = {
        **(metadata or {}),
        ARCHITECTURE_KEY: architecture(network),
        FORMAT_KEY: FORMAT_VERSION,
        VERSION_KEY: sgps_version(),
        CHECKSUM_KEY: checksum(tensors),
    }
    atomic_write_bytes(path, save(tensors, metadata=described))


def load_checkpoint(
    path: str | Path, network: ConfiguredModule, expected: dict[str, str] | None = None
) -> dict[str, str]:
    """Load the tensors at `path` into `network`; return the checkpoint's metadata.

    `expected`: metadata entries the file must agree with where it records them (e.g.
    the search a run trained for, which the architecture alone does not tell apart).
    """
    file = Path(path)
    state = network.state_dict()
    limit = sum(t.numel() * t.element_size() for t in state.values()) + HEADER_ALLOWANCE
    tensors, metadata = _read_checkpoint(file, limit)
    saved = metadata.get(ARCHITECTURE_KEY)
    ours = architecture(network)
    if saved is None:
        raise CheckpointError(f"{file}: the checkpoint does not record its architecture; it was not written by sgps")
    if saved != ours:
        raise CheckpointError(f"{file}: saved from another architecture ({_difference(saved, ours)})")
    for key, value in (expected or {}).items():
        if key in metadata and metadata[key] != value:
            raise CheckpointError(f"{file}: saved with {key} = {metadata[key]!r}, but this run has {value!r}")
    stored = _stored_precision(file, metadata)
    _check_tensors(file, tensors, state, stored)
    if CHECKSUM_KEY in metadata and metadata[CHECKSUM_KEY] != checksum(tensors):
        raise CheckpointError(f"{file}: damaged: its tensors do not match the checksum written with them")
    device = device_of(network)
    try:
        network.load_state_dict({name: tensor.to(device, state[name].dtype) for name, tensor in tensors.items()})
    except RuntimeError as error:
        raise CheckpointError(f"{file}: tensors do not fit the network ({error})") from None
    return metadata


#: Bytes read at a time by `read_bounded`.
READ_CHUNK = 1 << 20


def read_bounded(file: Path, limit: int, what: str) -> bytes:
    """The bytes of `file`, refusing anything but a regular file of at most `limit` bytes (no FIFO, no device)."""
    try:
        info = file.stat()
    except FileNotFoundError:
        raise CheckpointError(f"{file}: no such {what} file") from None
    except OSError as error:
        raise CheckpointError(f"{file}: cannot read the {what} ({error.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(f"{file}: not a regular file; a {what} must be a plain file")
    if info.st_size > limit:
        raise CheckpointError(f"{file}: {info.st_size:,} bytes, more than a {what} of this run can hold ({limit:,})")
    chunks, size = [], 0
    try:  # in chunks: `read(limit + 1)` would reserve the whole bound (GiBs) under a memory limit
        with open(file, "rb") as handle:
            while chunk := handle.read(READ_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise CheckpointError(f"{file}: grew past what a {what} of this run can hold ({limit:,} bytes)")
                chunks.append(chunk)
    except OSError as error:
        raise CheckpointError(f"{file}: cannot read the {what} ({error.strerror})") from None
    return b"".join(chunks)


def round_checkpoint(source: str | Path, target: str | Path, precision: str = "bfloat16") -> str:
    """Write to `target` the checkpoint at `source` with its float32 tensors rounded to `precision`.

    Every other tensor (integer counters) and every metadata entry are kept; the checksum
    is that of the rounded tensors, so the new file names its own weights, and the source's
    checksum is kept as `ROUNDED_FROM_KEY` (which trained weights these are). Returns the
    new checksum. The source is checked against its own checksum first; a source already
    stored narrower is refused (rounding twice would hide what was trained), and so is a
    target that is the source itself (a run's own checkpoint must stay what it trained).
    """
    file = Path(source)
    if precision not in STORED_PRECISIONS:
        raise CheckpointError(f"{precision!r}: a checkpoint can store its weights as {', '.join(STORED_PRECISIONS)}")
    if Path(target).resolve() == file.resolve():
        raise CheckpointError(f"{target}: the rounded checkpoint would replace the one it is rounded from; "
                              "write it to another file")  # fmt: skip
    tensors, metadata = _read_checkpoint(file, 1 << 34)
    if ARCHITECTURE_KEY not in metadata:
        raise CheckpointError(f"{file}: the checkpoint does not record its architecture; it was not written by sgps")
    if STORED_PRECISION_KEY in metadata:
        raise CheckpointError(f"{file}: its weights are already stored as {metadata[STORED_PRECISION_KEY]}")
    trained = checksum(tensors)
    if CHECKSUM_KEY in metadata and metadata[CHECKSUM_KEY] != trained:
        raise CheckpointError(f"{file}: damaged: its tensors do not match the checksum written with them")
    narrow = STORED_PRECISIONS[precision]
    rounded = {name: tensor.to(narrow) if tensor.dtype == torch.float32 else tensor for name, tensor in tensors.items()}
    for name, tensor in rounded.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{file}: tensor {name} holds values beyond what {precision} can hold")
    digest = checksum(rounded)
    described = {**metadata, STORED_PRECISION_KEY: precision, ROUNDED_FROM_KEY: trained,
                 CHECKSUM_KEY: digest}  # fmt: skip
    try:
        atomic_write_bytes(target, save(rounded, metadata=described))
    except OSError as error:
        raise CheckpointError(f"{target}: cannot write the rounded checkpoint ({error.strerror})") from None
    return digest


def _read_checkpoint(file: Path, limit: int) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and metadata of the checkpoint `file` (at most `limit` bytes, `read_bounded`)."""
    data = read_bounded(file, limit, "checkpoint")
    try:
        return load(data), _metadata(data)
    except (SafetensorError, ValueError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{file}: not a readable sgps checkpoint (corrupted or truncated: {error})") from None


def _stored_precision(file: Path, metadata: dict[str, str]) -> torch.dtype | None:
    """The narrower type the checkpoint says it stores its float32 tensors in (None: stored as they are)."""
    name = metadata.get(STORED_PRECISION_KEY)
    if name is None:
        return None
    if name not in STORED_PRECISIONS:
        raise CheckpointError(f"{file}: stores its weights as {name!r}; sgps reads {', '.join(STORED_PRECISIONS)}")
    return STORED_PRECISIONS[name]


def _check_tensors(
    file: Path, tensors: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], stored: torch.dtype | None = None
) -> None:
    """Names, shapes and data types as the network's (float32 ones as `stored`, when the file
    says it stores them narrower), and finite floating-point values."""
    missing, extra = sorted(expected.keys() - tensors.keys()), sorted(tensors.keys() - expected.keys())
    if missing or extra:
        raise CheckpointError(
            f"{file}: tensors do not fit the network (missing: {missing[:3]}, unexpected: {extra[:3]})"
        )
    for name, tensor in tensors.items():
        want = expected[name]
        dtype = stored if stored is not None and want.dtype == torch.float32 else want.dtype
        if tensor.dtype != dtype or tensor.shape != want.shape:
            raise CheckpointError(
                f"{file}: tensor {name} is {tensor.dtype} {tuple(tensor.shape)}, the network needs "
                f"{dtype} {tuple(want.shape)}"
            )
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{file}: tensor {name} holds NaN or infinite values; the training diverged")


def _metadata(data: bytes) -> dict[str, str]:
    """The `__metadata__` of a safetensors byte string (8-byte header length, then JSON)."""
    if len(data) < 8:
        raise ValueError("file shorter than a safetensors header")
    size = int.from_bytes(data[:8], "little")
    header = parse_json(data[8 : 8 + size])
    if not isinstance(header, dict) or not isinstance(header.get("__metadata__", {}), dict):
        raise ValueError("a safetensors header that is not a JSON object")
    return dict(header.get("__metadata__", {}))


def _difference(saved: str, expected: str) -> str:
    ours, theirs = parse_json(expected), parse_json(saved)
    changed = [
        f"{key}: file {theirs.get(key)!r}, network {ours.get(key)!r}" for key in ours if ours[key] != theirs.get(key)
    ]
    return "; ".join(changed) or "unrecognised fields"


def device_of(module: torch.nn.Module) -> torch.device:
    """Where a network's weights are: where loaded tensors go, and an evaluator's default
    device, so that observations follow the network (a CPU default once fed CPU tensors to
    a network on a GPU)."""
    return next(module.parameters()).device
