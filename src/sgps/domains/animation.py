"""Animated solutions: a GIF with one frame per state of a trajectory.

Each frame is the domain's own picture of one state (`Domain.render_image`) above a
caption strip that reads ``step t/T``. The caption also keeps neighbouring frames
distinct: the GIF encoder merges identical neighbours, and two states can look alike
(a domain need not draw every field), so without it a GIF could hold fewer frames than
the trajectory has states. Pillow encodes the file, which is written atomically.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from sgps.domains.base import Domain
from sgps.fileio import atomic_write_bytes

#: Pixels of the caption strip under each picture, and its colours.
CAPTION_HEIGHT = 14
CAPTION_BACKGROUND = (255, 255, 255)
CAPTION_TEXT = (40, 40, 40)


def trajectory(domain: Domain[Any], start: Any, actions: Sequence[int]) -> list[Any]:
    """The states s_0 ... s_T that applying `actions` from `start` visits."""
    states = [start]
    for action in actions:
        states.append(domain.step(states[-1], action))
    return states


def checked_trajectory(domain: Domain[Any], start: Any, actions: Sequence[int]) -> tuple[list[Any], str | None]:
    """The states `actions` visit from `start`, and what makes them no solution (None when they are one).

    The one replay every record of a solution goes through before it counts (test records,
    dataset journals, dataset files): an action outside the domain's, or an end that is not a goal.
    """
    if any(not 0 <= action < domain.num_actions for action in actions):
        return [start], f"an action outside 0..{domain.num_actions - 1}"
    states = trajectory(domain, start, actions)
    return states, None if domain.is_goal(states[-1]) else f"its actions do not reach a goal in {domain.name}"


def frames(domain: Domain[Any], states: Sequence[Any], cell: int = 16) -> list[Image.Image]:
    """One captioned picture per state, `cell` pixels per grid cell."""
    last = len(states) - 1
    pictures = []
    for t, state in enumerate(states):
        image = domain.render_image(state, cell)
        height, width, _ = image.shape
        frame = Image.new("RGB", (width, height + CAPTION_HEIGHT), CAPTION_BACKGROUND)
        frame.paste(Image.fromarray(image), (0, 0))
        ImageDraw.Draw(frame).text((2, height + 1), f"step {t}/{last}", fill=CAPTION_TEXT)
        pictures.append(frame)
    return pictures


def gif_bytes(pictures: Sequence[Image.Image], frame_ms: int = 250, hold_ms: int = 1000) -> bytes:
    """A looping GIF of `pictures`, each shown `frame_ms`, the last held `hold_ms` before the loop restarts."""
    if not pictures:
        raise ValueError("a GIF needs at least one frame")
    durations = [frame_ms] * (len(pictures) - 1) + [hold_ms]
    buffer = io.BytesIO()
    first, *rest = pictures
    first.save(buffer, format="GIF", save_all=True, append_images=rest, duration=durations, loop=0)
    return buffer.getvalue()


def write_gif(path: str | Path, domain: Domain[Any], states: Sequence[Any], *, cell: int = 16) -> None:
    """Animate `states` (e.g. `trajectory(domain, start, actions)`) into the GIF file `path`, atomically."""
    atomic_write_bytes(path, gif_bytes(frames(domain, states, cell)))
