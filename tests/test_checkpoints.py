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
