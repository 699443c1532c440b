"""Animated solutions: one GIF frame per state, drawn by the domain's renderer; `sgps solve --gif`."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageSequence

from sgps.cli import main
from sgps.domains import get_domain, read_levels, solve
from sgps.domains.animation import CAPTION_HEIGHT, gif_bytes, trajectory, write_gif


def gif_frames(path) -> list[np.ndarray]:
    with Image.open(path) as image:
        return [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(image)]


def test_a_solved_level_gives_one_frame_per_state(tmp_path):
    domain = get_domain("tsp")
    start = domain.generate(3, **domain.variants["hard"])
    result = solve(domain, start)
    states = trajectory(domain, start, result.actions)
    assert len(states) == result.length + 1 and domain.is_goal(states[-1])
    path = tmp_path / "solution.gif"
    write_gif(path, domain, states, cell=8)

    frames = gif_frames(path)
    assert len(frames) == len(states)
    picture = domain.render_image(start, 8)
    assert frames[0].shape == (picture.shape[0] + CAPTION_HEIGHT, picture.shape[1], 3)
    for t in (0, len(states) // 2, len(states) - 1):  # the renderer's picture, untouched, above the caption
        assert np.array_equal(frames[t][: picture.shape[0]], domain.render_image(states[t], 8))
    with Image.open(path) as image:
        image.seek(image.n_frames - 1)
        assert image.info["duration"] > 250  # the last state is held before the loop restarts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["solution.gif"]  # no temporary file left


def test_states_that_look_alike_still_get_their_own_frames(tmp_path):
    domain = get_domain("tsp")
    start = domain.generate(0)
    blocked = next(a for a in range(domain.num_actions) if domain.step(start, a) == start)
    states = trajectory(domain, start, [blocked, blocked])
    assert np.array_equal(domain.render_image(states[0]), domain.render_image(states[2]))
    write_gif(tmp_path / "still.gif", domain, states)
    assert len(gif_frames(tmp_path / "still.gif")) == 3


def test_a_gif_needs_a_frame():
    with pytest.raises(ValueError, match="at least one frame"):
        gif_bytes([])


@pytest.fixture
def levels(tmp_path, capsys):
    path = tmp_path / "levels.txt"
    assert main(["generate", "tsp", "--count", "2", "--seed", "11", "--out", str(path)]) == 0
    capsys.readouterr()
    return path


@pytest.mark.parametrize("extra", [[], ["--algorithm", "levin", "--budget", "5000"]])
def test_solve_gif_animates_the_solution_found(levels, tmp_path, capsys, extra):
    gif = tmp_path / "out" / "solution.gif"
    assert main(["solve", str(levels), "--index", "1", *extra, "--gif", str(gif)]) == 0
    out = capsys.readouterr().out
    actions = next(line for line in out.splitlines() if line.startswith("actions: ")).split()[1:]
    assert f"wrote {gif}" in out
    assert len(gif_frames(gif)) == len(actions) + 1
    domain = get_domain("tsp")
    names = list(domain.action_names)
    states = trajectory(domain, read_levels(levels).states()[1], [names.index(a) for a in actions])
    assert np.array_equal(gif_frames(gif)[-1][:-CAPTION_HEIGHT], domain.render_image(states[-1]))


def test_solve_gif_is_not_written_when_nothing_is_solved(tmp_path, capsys):
    level = tmp_path / "s.txt"
    main(["generate", "sokoban", "--count", "1", "--out", str(level)])
    gif = tmp_path / "none.gif"
    assert main(["solve", str(level), "--max-states", "10", "--gif", str(gif)]) == 1
    assert "not solved" in capsys.readouterr().out
    assert not gif.exists()
