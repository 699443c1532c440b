"""Gymnasium environments over the sgps domains.

Importing this module registers one environment per built-in domain::

    import gymnasium
    import sgps.gym

    env = gymnasium.make("sgps/TSP-v0", variant="hard", render_mode="rgb_array")

The ids are ``sgps/BoxWorld-v0``, ``sgps/CraftWorld-v0``, ``sgps/BoulderDash-v0``,
``sgps/Sokoban-v0`` and ``sgps/TSP-v0``. Gymnasium 1.x no longer discovers environments
of other packages through entry points, so import this module first, or let Gymnasium
import it: ``gymnasium.make("sgps.gym:sgps/TSP-v0")``.

An episode plays one level with the domain's own rules (`Domain.step`), so it follows
the reference simulators step for step. The observation is the domain's one-hot tensor
(`Domain.observe`), an action is the domain's action number, the reward is 1 when the
goal is reached and 0 otherwise (or what a `reward` function returns), `terminated`
is true at a goal or at a state the domain knows to be dead, and `truncated` when the
step limit is reached first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as error:
    raise ImportError(
        f"sgps.gym needs Gymnasium >= 1.0, which is not installed ({error}); install it with: pip install 'sgps[gym]'"
    ) from error

from sgps.domains import Domain, get_domain, read_levels
from sgps.domains.base import MAX_CELL
from sgps.domains.generation import generate_levels, resolve_params
from sgps.errors import ConfigError, check_whole_number

#: Gymnasium id of each built-in domain.
ENV_IDS: dict[str, str] = {
    "boxworld": "sgps/BoxWorld-v0",
    "craftworld": "sgps/CraftWorld-v0",
    "boulderdash": "sgps/BoulderDash-v0",
    "sokoban": "sgps/Sokoban-v0",
    "tsp": "sgps/TSP-v0",
}

#: reward(state, action, next_state): the reward of one step, replacing 1-at-the-goal.
RewardFunction = Callable[[Any, int, Any], float]


class SgpsEnv(gymnasium.Env[np.ndarray, np.int64]):
    """One sgps domain as a Gymnasium environment (see the module docstring for its semantics).

    Each `reset` starts a level from one source:

    - `level`: this domain state, every episode;
    - `level_file`: a level file or folder; level `level_index` every episode, or,
      with no index, a level drawn with the environment's random generator;
    - the generator (neither of the above): the level of `level_seed` every episode,
      or, with no seed, a new level from a seed drawn with the environment's random
      generator, so ``reset(seed=s)`` always plays the same level. `variant` (default
      ``standard``) and `params` (generator parameters) shape the levels.

    `max_steps` truncates an episode (None: never). Observations of every level must
    have one shape; a level file that mixes sizes needs a `level_index`.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array", "ansi"], "render_fps": 4}

    def __init__(
        self,
        domain: str | Domain[Any],
        *,
        level: Any = None,
        level_file: str | Path | None = None,
        level_index: int | None = None,
        level_seed: int | None = None,
        variant: str | None = None,
        params: Mapping[str, Any] | None = None,
        max_steps: int | None = 1000,
        reward: RewardFunction | None = None,
        render_mode: str | None = None,
        cell: int = 16,
    ) -> None:
        """`domain` is a registered name or a `Domain` object (e.g. ``Sokoban(observation="full")``)."""
        if not isinstance(domain, str | Domain):
            raise TypeError(f"domain must be a domain name (str) or a Domain object, not {type(domain).__name__} "
                            f"{domain!r}")  # fmt: skip
        self.domain = get_domain(domain) if isinstance(domain, str) else domain
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode must be one of {', '.join(self.metadata['render_modes'])} or None")
        if max_steps is not None:
            check_whole_number("max_steps", max_steps, 1, note=" (or None for no step limit)")
        check_whole_number("cell", cell, 1, MAX_CELL)
        for name, value in (("level_index", level_index), ("level_seed", level_seed)):
            if value is not None:
                check_whole_number(name, value, 0)
        if params is not None and not isinstance(params, Mapping):
            raise TypeError(f"params must be a mapping of generator parameters, not {type(params).__name__}")
        if level_file is not None and not isinstance(level_file, str | Path):
            raise TypeError(f"level_file must be a level file or folder (str or Path), not {type(level_file).__name__}")
        if reward is not None and not callable(reward):
            raise TypeError(f"reward must be a function reward(state, action, next_state) or None, not "
                            f"{type(reward).__name__}")  # fmt: skip
        self.render_mode = render_mode
        self.max_steps = max_steps
        self.cell = cell
        self._reward = reward
        self._fixed: Any = None
        self._levels: list[Any] = []
        self._params: dict[str, Any] = {}
        self._pick_source(level, level_file, level_index, level_seed, variant, params)
        first = self._first_level()
        shape = self.domain.observation_shape(first)
        if any(self.domain.observation_shape(other) != shape for other in self._levels):
            raise ConfigError(f"{level_file} mixes level sizes; choose one level with level_index")
        self.observation_space = spaces.Box(0.0, 1.0, shape, dtype=np.float32)
        self.action_space = spaces.Discrete(self.domain.num_actions)
        self.state: Any = first
        self.steps = 0
        self._ended = True  # no episode yet, or it terminated or was truncated: step() waits for reset()

    def _pick_source(
        self,
        level: Any,
        level_file: str | Path | None,
        level_index: int | None,
        level_seed: int | None,
        variant: str | None,
        params: Mapping[str, Any] | None,
    ) -> None:
        """Check that one level source is named, and load it."""
        sources = [name for name, value in (("level", level), ("level_file", level_file)) if value is not None]
        if level_seed is not None or variant is not None or params is not None:
            sources.append("the generator (level_seed, variant, params)")
        if len(sources) > 1:
            raise ConfigError(f"choose one level source, not {' and '.join(sources)}")
        if level_index is not None and level_file is None:
            raise ConfigError("level_index picks a level of level_file; pass level_file too")
        if level is not None:
            self.domain.check_state(level)
            self._fixed = level
        elif level_file is not None:
            levels = read_levels(level_file, self.domain).states()
            if level_index is None:
                self._levels = levels
            elif 0 <= level_index < len(levels):
                self._fixed = levels[level_index]
            else:
                raise ConfigError(f"{level_file} has {len(levels)} levels; level_index {level_index} is out of range")
        else:
            self._params = resolve_params(self.domain, variant or "standard", params)
            if level_seed is not None:
                self._fixed = self._generate(level_seed)

    def _first_level(self) -> Any:
        """A level of the source, to size the observation space before the first reset."""
        if self._fixed is not None:
            return self._fixed
        if self._levels:
            return self._levels[0]
        return self._generate(0)

    def _generate(self, seed: int) -> Any:
        return generate_levels(self.domain, self._params, seed, 1)[0]

    def _next_level(self) -> Any:
        if self._fixed is not None:
            return self._fixed
        if self._levels:
            return self._levels[int(self.np_random.integers(len(self._levels)))]
        return self._generate(int(self.np_random.integers(2**31)))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode on the next level of the source; `seed` reseeds the environment's generator."""
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"options must be a dict or None, not {type(options).__name__}")
        if seed is not None:
            check_whole_number("seed", seed, 0)
        super().reset(seed=seed, options=options)
        self.state = self._next_level()
        self.steps = 0
        self._ended = False
        return self._observation(), {"solved": self.domain.is_goal(self.state)}

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Apply `action` with the domain's rules; info["solved"] tells a goal from a dead end."""
        if self._ended:
            raise gymnasium.error.ResetNeeded("no episode is running (none was started, or it terminated or was "
                                              "truncated); call reset() first")  # fmt: skip
        if isinstance(action, bool | np.bool_) or not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        previous, move = self.state, int(action)
        self.state = self.domain.step(previous, move)
        self.steps += 1
        solved = self.domain.is_goal(self.state)
        terminated = solved or self.domain.is_dead(self.state)
        truncated = not terminated and self.max_steps is not None and self.steps >= self.max_steps
        reward = float(solved) if self._reward is None else float(self._reward(previous, move, self.state))
        self._ended = terminated or truncated
        return self._observation(), reward, terminated, truncated, {"solved": solved}

    def render(self) -> np.ndarray | str | None:
        """The state as an RGB picture (``rgb_array``) or as text (``ansi``)."""
        if self.render_mode == "rgb_array":
            return self.domain.render_image(self.state, self.cell)
        if self.render_mode == "ansi":
            return self.domain.render_text(self.state) + "\n"
        return None

    def _observation(self) -> np.ndarray:
        """[C, H, W] float32, C-contiguous (the domains lay batches out channels-last for the networks)."""
        return np.ascontiguousarray(self.domain.observe([self.state])[0])


def _register() -> None:
    for name, env_id in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="sgps.gym:SgpsEnv", kwargs={"domain": name})


_register()

__all__ = ["ENV_IDS", "RewardFunction", "SgpsEnv"]
