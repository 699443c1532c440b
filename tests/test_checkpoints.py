"""Checkpoints: round trip, another architecture, corrupted files, atomic writes, weights rounded to ship."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from sgps.errors import CheckpointError
from sgps.models import FlatNetwork, FlatNetworkConfig
from sgps.models.checkpoint import (
    CHECKSUM_KEY,
    load_checkpoint,
    round_checkpoint,
    save_checkpoint,
    stored_precision,
    weights_digest,
)


def network(channels: int = 8, seed: int = 0) -> FlatNetwork:
    torch.manual_seed(seed)
    return FlatNetwork(FlatNetworkConfig((8, 10, 10), 4, channels=channels, blocks=1))


def test_round_trip_restores_every_tensor(tmp_path):
    path = tmp_path / "ckpt" / "latest.safetensors"
    saved = network(seed=1)
    save_checkpoint(path, saved, {"iteration": "3"})
    loaded = network(seed=2)
    metadata = load_checkpoint(path, loaded)
    assert metadata["iteration"] == "3"
    for (name, a), (_, b) in zip(saved.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert [p.name for p in path.parent.iterdir()] == ["latest.safetensors"]  # no temporary file left


def test_another_architecture_is_refused_by_name(tmp_path):
    path = tmp_path / "latest.safetensors"
    save_checkpoint(path, network(channels=8))
    with pytest.raises(CheckpointError, match=r"saved from another architecture \(channels: file 8, network 16\)"):
        load_checkpoint(path, network(channels=16))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupted_files_give_a_clear_error(tmp_path, damage):
    path = tmp_path / "latest.safetensors"
    save_checkpoint(path, network())
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"\x00garbage" * 10, "empty": b""}[damage])
    with pytest.raises(CheckpointError, match="not a readable sgps checkpoint"):
        load_checkpoint(path, network())


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        load_checkpoint(tmp_path / "nope.safetensors", network())


def test_a_failed_write_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "latest.safetensors"
    first = network(seed=1)
    save_checkpoint(path, first)
    before = path.read_bytes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, network(seed=2))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["latest.safetensors"]


def test_bounded_reads_take_what_the_file_holds_in_chunks(tmp_path, monkeypatch):
    from sgps.models import checkpoint

    path = tmp_path / "trainer.pt"
    path.write_bytes(bytes(range(256)) * 9000)  # 2.3 MB: three chunks
    requested = []

    class Recording:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def read(self, size=-1):
            requested.append(size)
            return self.handle.read(size)

    def recording_open(*args, **kwargs):
        return Recording(open(*args, **kwargs))

    monkeypatch.setattr(checkpoint, "open", recording_open, raising=False)
    assert checkpoint.read_bounded(path, 4 << 30, "trainer checkpoint") == path.read_bytes()
    assert requested and max(requested) <= checkpoint.READ_CHUNK  # never the 4 GiB bound (ulimit -v)
    with pytest.raises(CheckpointError, match="more than a trainer checkpoint"):
        checkpoint.read_bounded(path, 1000, "trainer checkpoint")


def test_weights_rounded_to_bfloat16_load_as_the_rounded_values_in_float32(tmp_path):
    """Half the bytes; the network gets exactly the rounded weights back, widened to float32, under a
    checksum of its own (a test of the rounded file is not a test of the float32 one)."""
    source, rounded = tmp_path / "latest.safetensors", tmp_path / "rounded.safetensors"
    trained = network(seed=1)
    save_checkpoint(source, trained, {"iteration": "3"})
    digest = round_checkpoint(source, rounded)
    assert rounded.stat().st_size < 0.6 * source.stat().st_size
    assert digest == weights_digest(rounded) != weights_digest(source)
    assert stored_precision(rounded) == ("bfloat16", weights_digest(source))  # which trained weights it came from
    assert stored_precision(source) == ("float32", None)
    loaded = network(seed=2)
    metadata = load_checkpoint(rounded, loaded)
    assert metadata["iteration"] == "3"
    for name, tensor in trained.state_dict().items():
        got = loaded.state_dict()[name]
        assert got.dtype == tensor.dtype == torch.float32, name
        assert torch.equal(got, tensor.to(torch.bfloat16).to(torch.float32)), name
    assert not all(torch.equal(loaded.state_dict()[n], t) for n, t in trained.state_dict().items())


def test_rounding_refuses_rounded_damaged_or_foreign_files_and_leaves_no_target(tmp_path):
    source, rounded, target = tmp_path / "latest.safetensors", tmp_path / "rounded.safetensors", tmp_path / "t"
    save_checkpoint(source, network())
    round_checkpoint(source, rounded)
    with pytest.raises(CheckpointError, match="already stored as bfloat16"):
        round_checkpoint(rounded, target)
    with pytest.raises(CheckpointError, match="can store its weights as bfloat16"):
        round_checkpoint(source, target, "int8")
    before = source.read_bytes()
    with pytest.raises(CheckpointError, match="would replace the one it is rounded from"):
        round_checkpoint(source, tmp_path / "." / "latest.safetensors")
    assert source.read_bytes() == before
    (tmp_path / "folder").mkdir()
    with pytest.raises(CheckpointError, match=r"folder: cannot write the rounded checkpoint"):
        round_checkpoint(source, tmp_path / "folder")
    huge = tmp_path / "huge.safetensors"
    big = network()
    with torch.no_grad():
        next(big.parameters()).fill_(3.4e38)  # finite in float32, past bfloat16's largest
    save_checkpoint(huge, big)
    with pytest.raises(CheckpointError, match="beyond what bfloat16 can hold"):
        round_checkpoint(huge, target)
    tensors = load_file(source)
    damaged = tmp_path / "damaged.safetensors"
    first = sorted(tensors)[0]
    save_file({**tensors, first: tensors[first] + 1}, damaged, metadata={CHECKSUM_KEY: weights_digest(source),
                                                                         "sgps.architecture": "{}"})  # fmt: skip
    with pytest.raises(CheckpointError, match="damaged"):
        round_checkpoint(damaged, target)
    foreign = tmp_path / "foreign.safetensors"
    save_file(tensors, foreign)
    with pytest.raises(CheckpointError, match="does not record its architecture"):
        round_checkpoint(foreign, target)
    assert not target.exists()


def test_a_rounded_file_whose_tensors_were_left_float32_or_names_an_unknown_type_is_refused(tmp_path):
    source = tmp_path / "latest.safetensors"
    save_checkpoint(source, network())
    rounded = tmp_path / "rounded.safetensors"
    round_checkpoint(source, rounded)
    with safe_open(str(rounded), "pt") as opened:
        metadata = opened.metadata()
    mislabelled = tmp_path / "mislabelled.safetensors"
    save_file(load_file(source), mislabelled, metadata=metadata)  # says bfloat16, holds float32
    with pytest.raises(CheckpointError, match=r"is torch\.float32 .* the network needs torch\.bfloat16"):
        load_checkpoint(mislabelled, network())
    unknown = tmp_path / "unknown.safetensors"
    save_file(load_file(rounded), unknown, metadata={**metadata, "sgps.stored_precision": "float8"})
    with pytest.raises(CheckpointError, match="stores its weights as 'float8'"):
        load_checkpoint(unknown, network())
