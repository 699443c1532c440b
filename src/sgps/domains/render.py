"""Drawing grid states as RGB images, and a dependency-free PNG writer.

Each domain maps every cell to a `Sprite` (a background colour and an optional
glyph drawn over it); `draw_cells` turns a plane of sprite indices into an image.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from sgps.fileio import atomic_write_bytes

RGB = tuple[int, int, int]

#: Glyphs a sprite can draw over its background.
GLYPHS = ("none", "circle", "ring", "dot", "diamond", "square", "frame", "cross", "x", "triangle", "bars")


@dataclass(frozen=True)
class Sprite:
    """How one kind of cell looks: `glyph` in `colour` over `background`."""

    background: RGB
    glyph: str = "none"
    colour: RGB = (0, 0, 0)

    def __post_init__(self) -> None:
        if self.glyph not in GLYPHS:
            raise ValueError(f"unknown glyph {self.glyph!r}; choose from {', '.join(GLYPHS)}")


def glyph_mask(glyph: str, size: int) -> np.ndarray:
    """A boolean [size, size] mask of `glyph` centred in a cell."""
    centre = (size - 1) / 2.0
    y, x = np.mgrid[0:size, 0:size].astype(np.float64)
    dy, dx = (y - centre) / (size / 2.0), (x - centre) / (size / 2.0)
    radius = np.hypot(dx, dy)
    width = max(1.5 / size, 0.12)
    masks = {
        "none": np.zeros((size, size), dtype=bool),
        "circle": radius <= 0.62,
        "ring": (radius <= 0.66) & (radius >= 0.66 - 2 * width),
        "dot": radius <= 0.3,
        "diamond": (np.abs(dx) + np.abs(dy)) <= 0.7,
        "square": (np.abs(dx) <= 0.55) & (np.abs(dy) <= 0.55),
        "frame": (np.maximum(np.abs(dx), np.abs(dy)) <= 0.75)
        & (np.maximum(np.abs(dx), np.abs(dy)) >= 0.75 - 2 * width),
        "cross": ((np.abs(dx) <= width) | (np.abs(dy) <= width)) & (np.maximum(np.abs(dx), np.abs(dy)) <= 0.7),
        "x": ((np.abs(dx - dy) <= 1.4 * width) | (np.abs(dx + dy) <= 1.4 * width))
        & (np.maximum(np.abs(dx), np.abs(dy)) <= 0.65),
        "triangle": (dy <= 0.55) & (dy >= -0.65) & (np.abs(dx) <= (dy + 0.65) * 0.55),
        "bars": (np.abs(dy - 0.35) <= width) | (np.abs(dy) <= width) | (np.abs(dy + 0.35) <= width),
    }
    return masks[glyph]


@lru_cache(maxsize=128)
def sprite_tiles(sprites: tuple[Sprite, ...], cell: int) -> np.ndarray:
    """The [len(sprites), cell, cell, 3] uint8 tiles, with a thin darker grid line."""
    tiles = np.empty((len(sprites), cell, cell, 3), dtype=np.uint8)
    for i, sprite in enumerate(sprites):
        tile = np.empty((cell, cell, 3), dtype=np.float64)
        tile[:] = sprite.background
        tile[glyph_mask(sprite.glyph, cell)] = sprite.colour
        if cell >= 6:
            tile[-1, :, :] *= 0.8
            tile[:, -1, :] *= 0.8
        tiles[i] = np.clip(tile, 0, 255).astype(np.uint8)
    return tiles


def draw_cells(plane: np.ndarray, sprites: Sequence[Sprite], cell: int = 16) -> np.ndarray:
    """An RGB image [H*cell, W*cell, 3] drawing `sprites[plane[r, c]]` in each cell."""
    if cell < 1:
        raise ValueError("cell size must be at least 1 pixel")
    tiles = sprite_tiles(tuple(sprites), cell)
    height, width = plane.shape
    image = tiles[plane]  # [H, W, cell, cell, 3]
    return np.ascontiguousarray(image.transpose(0, 2, 1, 3, 4)).reshape(height * cell, width * cell, 3)


def png_bytes(image: np.ndarray) -> bytes:
    """Encode an RGB uint8 image [H, W, 3] as PNG."""
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError("png_bytes expects a uint8 array of shape [H, W, 3]")
    height, width, _ = image.shape
    rows = np.zeros((height, 1 + width * 3), dtype=np.uint8)  # filter byte 0 per row
    rows[:, 1:] = image.reshape(height, width * 3)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def write_png(path: str | Path, image: np.ndarray) -> None:
    """Write `image` as a PNG file atomically (temporary file, then rename)."""
    atomic_write_bytes(Path(path), png_bytes(image))
