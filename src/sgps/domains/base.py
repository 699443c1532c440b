"""The `Domain` protocol every search problem implements, and shared grid helpers.

A domain is a deterministic, single-agent, unit-cost search problem (the paper's
tuple (S, A, T, s0, S_g), Section 2). Its states are immutable, hashable values:
`step` returns a new state (or the same object when the action changes nothing),
and equal states are duplicates for the search. Everything a search, a solver or a
model needs from a problem goes through this class, so a user's own domain only has
to subclass `Domain` (see docs/domains.md for a worked example).

Domains do not import torch: `observe` returns a numpy float32 array.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from functools import lru_cache
from typing import Any, ClassVar, Generic, TypeVar, get_args, get_origin

import numpy as np

from sgps.errors import LevelFormatError

S = TypeVar("S", bound=Hashable)

#: The four moves shared by every grid domain: 0 Up (row - 1), 1 Right (col + 1),
#: 2 Down (row + 1), 3 Left (col - 1).
MOVE_NAMES: tuple[str, ...] = ("up", "right", "down", "left")
MOVE_DELTAS: tuple[tuple[int, int], ...] = ((-1, 0), (0, 1), (1, 0), (0, -1))


#: The largest picture cell, in pixels, that the command line and the Gymnasium environments
#: accept for `Domain.render_image` (a cell of 100,000 pixels would ask for hundreds of GiB).
MAX_CELL = 256

#: The largest level side the level format holds (its header fields are bytes in the
#: reference tools); generators refuse larger sizes before they build anything.
MAX_LEVEL_SIDE = 255


def check_generator_size(size: int, smallest: int) -> None:
    """Raise `ValueError` unless a generator's `size` is in [smallest, MAX_LEVEL_SIDE].

    Checked before the grid is built: a size of 20,000 would otherwise spend minutes
    (and a size of 100,000 all the memory) on a level the format cannot hold.
    """
    if not smallest <= size <= MAX_LEVEL_SIDE:
        raise ValueError(f"size must be between {smallest} and {MAX_LEVEL_SIDE}, not {size}")


def check_probability(name: str, value: float) -> None:
    """Raise `ValueError` unless a generator parameter is a probability (NaN is not)."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} is a probability between 0 and 1, not {value}")


class Domain(ABC, Generic[S]):
    """A search problem family: rules, level format, observation, rendering, generators.

    Subclasses set the class attributes and implement the abstract methods. States
    must be immutable and hashable; `key(state)` (the state itself by default) is
    what duplicate detection compares.
    """

    #: Registry name, e.g. ``"tsp"``.
    name: ClassVar[str]
    #: Names of the actions, indexed by action number. Every action applies in
    #: every state; one that can do nothing returns the state unchanged.
    action_names: ClassVar[tuple[str, ...]] = MOVE_NAMES
    #: Names of the level-line header fields, e.g. ``("rows", "cols", "goal")``.
    header_fields: ClassVar[tuple[str, ...]] = ("rows", "cols")
    #: The exact solver's method under ``method="auto"``: ``None`` picks A* when the
    #: domain has a heuristic, else BFS; a domain whose heuristic is too weak to pay
    #: for itself names ``"bfs"``.
    exact_solver: ClassVar[str | None] = None
    #: Generator variants: name -> default keyword arguments of `generate`.
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    @property
    def num_actions(self) -> int:
        """|A|: the size of the policy output."""
        return len(self.action_names)

    # -- level format -------------------------------------------------------------

    @abstractmethod
    def parse(self, fields: Sequence[int]) -> S:
        """The initial state of the level whose `|`-separated integer fields are given.

        Raises `LevelFormatError` (without a location: the file reader adds it).
        """

    def check_level(self, state: S) -> None:
        """Refuse a level read from a file that can never be solved (e.g. it has no goal).

        Raises `LevelFormatError` without a location, as `parse` does; `parse` itself
        accepts such states, which the rule tests build on purpose.
        """

    @abstractmethod
    def encode(self, state: S) -> list[int]:
        """The level-line fields (header then cells) that `parse` turns into `state`."""

    @abstractmethod
    def grid_codes(self, state: S) -> list[int]:
        """The state's grid, row-major, in the domain's level-code space.

        Codes that only arise during play (e.g. a visited TSP city) are included;
        this is the ``grid`` field of the reference traces.
        """

    # -- rules --------------------------------------------------------------------

    @abstractmethod
    def step(self, state: S, action: int) -> S:
        """The state reached by applying `action` (unit cost)."""

    def successors(self, state: S) -> list[S]:
        """`step(state, a)` for every action, in action order."""
        step = self.step
        return [step(state, action) for action in range(self.num_actions)]

    @abstractmethod
    def is_goal(self, state: S) -> bool:
        """True for solution states (the search stops when it generates one)."""

    def is_dead(self, state: S) -> bool:
        """True for terminal non-goal states (never expanded). None by default."""
        return False

    def key(self, state: S) -> Hashable:
        """The value duplicate detection compares: the state itself by default."""
        return state

    def solver_key(self, state: S) -> Hashable:
        """What the exact solver compares: `key` unless a domain can soundly coarsen it.

        Two states may share a solver key only if every action sequence does the same
        thing from both (so their costs to a goal are equal); the solver then stores
        one of them.
        """
        return self.key(state)

    def may_reach(self, starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """False where no action sequence leads from a state observed as starts[i] to one observed as goals[i].

        `starts` and `goals` are [B, C, H, W] observations in this domain's `observe`
        form (goals may be any one-hot-or-empty grids, e.g. decoded subgoals); the
        answer is a boolean [B]. It is a necessary condition only: True promises
        nothing, but False must be certain, because HIPS-ε drops the subgoals it rejects
        without rolling out towards them. Domains build it from invariants of their
        rules (`sgps.domains.invariants`); the default knows none and rejects nothing.
        """
        return np.ones(len(starts), dtype=bool)

    def heuristic(self, state: S) -> float:
        """An admissible lower bound on the cost to a goal (0 when none is cheap).

        `math.inf` marks a state from which no goal is reachable.
        """
        return 0.0

    # -- observation and rendering ------------------------------------------------

    @abstractmethod
    def observation_shape(self, state: S) -> tuple[int, int, int]:
        """(C, H, W) of `observe` for states of this level's size."""

    @abstractmethod
    def observe(self, states: Sequence[S]) -> np.ndarray:
        """A float32 array [B, C, H, W]: the one-hot encoding of each state.

        All states must have the same observation shape. The built-in domains lay the
        array out channels-last in memory (a [B, H, W, C] array seen through
        ``transpose(0, 3, 1, 2)``; `one_hot`), the layout the CPU networks compute in, so a
        batch reaches them without a copy; any layout is correct, the values are what counts.
        """

    @abstractmethod
    def render_text(self, state: S) -> str:
        """A human-readable text picture of the state."""

    @abstractmethod
    def render_image(self, state: S, cell: int = 16) -> np.ndarray:
        """An RGB uint8 picture [H * cell, W * cell, 3] of the state."""

    # -- generators ---------------------------------------------------------------

    def generate(self, seed: int, **params: Any) -> S:
        """A new level from the generator, deterministic in `seed`.

        Keyword arguments are the generator parameters; `variants` gives the
        defaults for each named variant.
        """
        raise NotImplementedError(f"domain {self.name!r} has no level generator")

    def describe(self, state: S) -> str:
        """One line naming the level's size and the main facts of its header."""
        rows, cols = self.encode(state)[:2]
        return f"{self.name} {rows}x{cols}"

    @classmethod
    def state_type(cls) -> type | None:
        """The class of this domain's states, from ``Domain[StateClass]`` in its bases (None if not named)."""
        for klass in cls.__mro__:
            for base in getattr(klass, "__orig_bases__", ()):
                args = get_args(base)
                if get_origin(base) is Domain and args and isinstance(args[0], type):
                    return args[0]
        return None

    def check_state(self, value: Any, name: str = "level") -> None:
        """`TypeError` naming `name` unless `value` is a state of this domain (where public functions take one)."""
        expected = self.state_type()
        if expected is not None and not isinstance(value, expected):
            raise TypeError(f"{name} must be a {self.name} level (a {expected.__name__}, a Level or a level file), "
                            f"not {type(value).__name__}")  # fmt: skip


class Board:
    """Static facts shared by every state of one level (its size and move table).

    Boards are interned: `Board.of` returns one object per distinct set of facts, so
    states may hold a board, compare it by identity and hash it by address (both in
    C), and still compare equal across separately parsed copies of a level.
    Unpickling returns the interned object too.
    """

    __slots__ = ("cols", "extra", "moves", "rows")

    _interned: ClassVar[dict[tuple[Any, ...], Board]] = {}

    rows: int
    cols: int
    moves: tuple[tuple[int, ...], ...]
    extra: Any

    def __new__(cls, *args: Any) -> Board:  # pragma: no cover - use Board.of
        raise TypeError("use Board.of(rows, cols, extra) to get a board")

    @classmethod
    def of(cls, rows: int, cols: int, extra: Hashable = None) -> Board:
        """The interned board for a `rows` x `cols` level with domain facts `extra`."""
        identity = (rows, cols, extra)
        board = cls._interned.get(identity)
        if board is None:
            board = object.__new__(cls)
            board.rows = rows
            board.cols = cols
            board.moves = move_table(rows, cols)
            board.extra = extra
            cls._interned[identity] = board
        return board

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (Board.of, (self.rows, self.cols, self.extra))

    def __repr__(self) -> str:
        return f"Board({self.rows}x{self.cols})"


@lru_cache(maxsize=64)
def move_table(rows: int, cols: int) -> tuple[tuple[int, ...], ...]:
    """For each move action, the target cell index of every cell (-1 off the grid)."""
    table = []
    for dr, dc in MOVE_DELTAS:
        targets = []
        for index in range(rows * cols):
            r, c = divmod(index, cols)
            r2, c2 = r + dr, c + dc
            targets.append(r2 * cols + c2 if 0 <= r2 < rows and 0 <= c2 < cols else -1)
        table.append(tuple(targets))
    return tuple(table)


def split_level(fields: Sequence[int], header: Sequence[str]) -> tuple[list[int], list[int]]:
    """Split level fields into the header values and the `rows*cols` cell codes.

    Checks that the size is positive and that the cell count matches it.
    """
    if len(fields) < len(header):
        raise LevelFormatError(f"the level header needs {len(header)} fields ({'|'.join(header)}), found {len(fields)}")
    head = list(fields[: len(header)])
    rows, cols = head[0], head[1]
    if rows <= 0 or cols <= 0:
        raise LevelFormatError(f"bad level header: rows={rows} cols={cols} must both be positive")
    if rows > MAX_LEVEL_SIDE or cols > MAX_LEVEL_SIDE:
        raise LevelFormatError(
            f"bad level header: a {rows}x{cols} level is larger than {MAX_LEVEL_SIDE}x{MAX_LEVEL_SIDE}"
        )
    cells = list(fields[len(header) :])
    if len(cells) != rows * cols:
        raise LevelFormatError(f"expected {rows * cols} cells for a {rows}x{cols} level, found {len(cells)}")
    return head, cells


def check_codes(cells: Sequence[int], allowed: Sequence[int] | range, domain: str, cols: int) -> None:
    """Raise a `LevelFormatError` naming the first cell whose code is not allowed."""
    allowed_set = set(allowed)
    for index, code in enumerate(cells):
        if code not in allowed_set:
            r, c = divmod(index, cols)
            raise LevelFormatError(
                f"cell {index} (row {r}, col {c}) has code {code}, "
                f"which is not a {domain} cell code ({describe_codes(allowed)})"
            )


def describe_codes(allowed: Sequence[int] | range) -> str:
    """'0-15' for a contiguous range of codes, else a comma list."""
    values = sorted(set(allowed))
    if values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(str(v) for v in values)


def count_exactly(cells: Sequence[int], codes: set[int], expected: int, what: str) -> list[int]:
    """Indices of the cells with a code in `codes`; raise unless there are `expected`."""
    found = [i for i, code in enumerate(cells) if code in codes]
    if len(found) != expected:
        raise LevelFormatError(f"a level needs exactly {expected} {what}, found {len(found)}")
    return found


def stack_grids(grids: Sequence[bytes], rows: int, cols: int) -> np.ndarray:
    """The byte grids of a batch as one uint8 array [B, rows, cols]."""
    if any(len(grid) != rows * cols for grid in grids):
        raise ValueError("observe() needs states of one size; this batch mixes level sizes")
    return np.frombuffer(b"".join(grids), dtype=np.uint8).reshape(len(grids), rows, cols)


def one_hot(codes: np.ndarray, channels: int) -> np.ndarray:
    """One-hot planes float32 [B, channels, H, W] from channel indices [B, H, W].

    A code >= `channels` sets no channel (an all-zero cell). The planes lie channels-last
    in memory (the [B, H, W, channels] array, transposed without a copy): the CPU
    convolutions take them as they are (`sgps.models.resnet.network_input`;
    docs/training.md, "Observation layout"), and building them costs no more than in NCHW.
    """
    batch, height, width = codes.shape
    cells = batch * height * width
    flat = codes.reshape(cells).astype(np.intp)
    out = np.zeros(cells * channels, dtype=np.float32)
    index = np.arange(0, cells * channels, channels, dtype=np.intp)
    index += flat
    valid = flat < channels
    out[index[valid] if not valid.all() else index] = 1.0
    return channels_first(out.reshape(batch, height, width, channels))


def channels_first(planes: np.ndarray) -> np.ndarray:
    """[B, H, W, C] planes seen as [B, C, H, W] (a view: the memory stays channels-last)."""
    return planes.transpose(0, 3, 1, 2)


def manhattan(a: int, b: int, cols: int) -> int:
    """Manhattan distance between cell indices `a` and `b` on a grid `cols` wide."""
    ar, ac = divmod(a, cols)
    br, bc = divmod(b, cols)
    return abs(ar - br) + abs(ac - bc)
