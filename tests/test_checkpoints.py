"""Checkpoints: round trip, another architecture, corrupted files, atomic writes."""

from __future__ import annotations

import pytest
import torch

from sgps.errors import CheckpointError
from sgps.models import FlatNetwork, FlatNetworkConfig
from sgps.models.checkpoint import load_checkpoint, save_checkpoint


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
