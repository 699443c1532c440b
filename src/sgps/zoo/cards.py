"""Model cards: what a pretrained model is, what it was trained on, how it tested, and its files' digests.

A shipped model is a folder ``sgps/zoo/models/NAME/`` that reads as a run folder (so every
command that opens a run opens it) plus its card::

    NAME/card.toml                       the card (below)
    NAME/config.toml                     the training run's resolved configuration
    NAME/checkpoints/latest.safetensors  the weights

The card names the domain, variant and level size the networks were built for, the
method and preset, the recipe it was trained with (budgets, memory), how much training it
had, its test table (the test procedure of spec/algorithms.md 6.7 on named level sets),
the sgps version that made it, and the SHA-256 of its other files, checked each time the
model is opened: a damaged file is refused, naming it, before any weights are read.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.errors import CheckpointError, ConfigError
from sgps.fileio import parse_toml_text, read_regular_text
from sgps.models.checkpoint import STORED_PRECISIONS, stored_precision

#: Where the models that install with the package live.
MODELS = Path(__file__).parent / "models"
CARD = "card.toml"
#: A model's name: lower-case words joined by hyphens (`hard-boulderdash`).
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
#: The files a model holds besides its card, each checked against the card's digest.
FILES = ("config.toml", "checkpoints/latest.safetensors")
#: The largest card read (a card is a few KiB; anything larger is not one).
MAX_CARD_BYTES = 1 << 16


@dataclass(frozen=True)
class TestRecord:
    """One row of a card's test table: the test procedure on a named level set."""

    name: str  # e.g. "official", "fresh"
    levels: str  # what the levels are, in words (generator, variant, seeds)
    budget: int  # first-round budget
    rounds: int  # rounds, the budget doubling each round
    solved: int
    total: int
    mean_expansions: float | None  # over the solved levels (the solving attempt), None when none solved
    mean_length: float | None
    within_first_budget: int  # solved in the first round

    def line(self) -> str:
        """The row in words: `98 of 100 within 512,000 (97 at 4,000), mean 2,107 expansions, 101.7 moves`."""
        cap = self.budget * 2 ** (self.rounds - 1)
        means = ("" if self.mean_expansions is None or self.mean_length is None
                 else f", mean {self.mean_expansions:,.0f} expansions, {self.mean_length:.1f} moves")  # fmt: skip
        return f"{self.solved} of {self.total} within {cap:,} ({self.within_first_budget} at {self.budget:,}){means}"


@dataclass(frozen=True)
class ModelCard:
    """A pretrained model's card (`card.toml`), read and checked (`read_card`)."""

    folder: Path
    name: str
    version: int
    summary: str  # one sentence
    domain: str
    variant: str
    observation_shape: tuple[int, int, int]  # the levels the networks were built for (channels, rows, columns)
    algorithm: str
    preset: str
    precision: str  # what the weights are stored as: "float32" as trained, or "bfloat16" (rounded to ship)
    recipe: str  # the training recipe in words (budget schedule, memory)
    sgps_version: str
    made: str  # date
    training: Mapping[str, Any]  # problems (words), expansions, solved, total, source
    tests: tuple[TestRecord, ...]
    digests: Mapping[str, str]  # file -> SHA-256 hex

    @property
    def size(self) -> str:
        """The grid the networks read, in words: `14x14`. It is the level's own size where the domain
        observes a level cell by cell, larger where its observation adds a border (Box-World's 20x20
        levels are observed as 22x22)."""
        return f"{self.observation_shape[1]}x{self.observation_shape[2]}"

    def one_line(self) -> str:
        """`sgps models`'s line: name, domain, method, and the first test's result."""
        test = f"; {self.tests[0].name} test: {self.tests[0].line()}" if self.tests else ""
        levels = f"{self.domain} {self.variant}, observed as {self.size}"
        return f"{self.name} (v{self.version}): {levels}, {self.algorithm}{test}"

    def check_files(self) -> None:
        """Refuse a model whose files do not match the card's digests (a damaged or replaced file)."""
        for member in FILES:
            path = self.folder / member
            if not path.is_file():
                raise CheckpointError(f"model {self.name}: {path} is missing; reinstall sgps")
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != self.digests[member]:
                raise CheckpointError(f"model {self.name}: {path} does not match the checksum in its card "
                                      f"({CARD}); the file is damaged: reinstall sgps")  # fmt: skip
        weights = self.folder / FILES[1]
        stored, _ = stored_precision(weights)
        if stored != self.precision:
            raise CheckpointError(f"model {self.name}: {weights} stores its weights as {stored}, its card "
                                  f"({CARD}) says {self.precision}; reinstall sgps")  # fmt: skip

    def check_level(self, domain: str, shape: tuple[int, int, int], where: str) -> None:
        """Refuse levels the model was not built for: another domain, or another size."""
        if domain != self.domain:
            raise ConfigError(f"{where}: {domain} levels; the model {self.name} solves {self.domain} levels")
        if tuple(shape) != self.observation_shape:
            raise ConfigError(f"{where}: levels observed as {shape[1]}x{shape[2]} cells ({shape[0]} channels); the "
                              f"model {self.name} was trained on {self.domain} levels observed as {self.size} cells "
                              f"({self.observation_shape[0]} channels)")  # fmt: skip


def names(root: Path = MODELS) -> list[str]:
    """The names of the models under `root` (those that install with the package by default)."""
    if not root.is_dir():
        return []
    return sorted(entry.name for entry in root.iterdir() if is_model_name(entry.name) and (entry / CARD).is_file())


def is_model_name(text: str) -> bool:
    """Whether `text` is shaped like a model name (and so is looked up as one when no such path exists)."""
    return NAME.fullmatch(text) is not None


def find(name: str, root: Path = MODELS) -> ModelCard:
    """The card of the model `name`, its files checked; a `ConfigError` listing the models for an unknown name."""
    known = names(root)
    if name not in known:
        listed = ", ".join(known) if known else "none are installed"
        raise ConfigError(f"{name}: no such run folder or model (models: {listed}; `sgps models` describes them)")
    card = read_card(root / name)
    card.check_files()
    return card


def card_of(folder: Path) -> ModelCard | None:
    """The checked card of `folder` when it is a model's folder (its card read, its files checked), else None."""
    if not (folder / CARD).is_file():
        return None
    card = read_card(folder)
    card.check_files()
    return card


def read_card(folder: Path) -> ModelCard:
    """Read and check ``folder/card.toml``; a `CheckpointError` naming the file and the key for a bad card."""
    file = folder / CARD
    try:
        if file.stat().st_size > MAX_CARD_BYTES:
            raise CheckpointError(f"{file}: {file.stat().st_size:,} bytes, not a model card; reinstall sgps")
        document = parse_toml_text(read_regular_text(file))
    except (OSError, UnicodeDecodeError, ValueError) as error:  # TOMLDecodeError, DocumentLimitError
        raise CheckpointError(f"{file}: not a readable model card ({error}); reinstall sgps") from None
    reader = _Fields(file, document)
    shape = reader.get("observation_shape", list)
    if len(shape) != 3 or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
        raise CheckpointError(f"{file}: observation_shape must be three positive integers, got {shape!r}")
    digests = reader.get("files", dict)
    for member in FILES:
        if not isinstance(digests.get(member), str) or not re.fullmatch(r"[0-9a-f]{64}", digests[member]):
            raise CheckpointError(f"{file}: files.\"{member}\" must be a SHA-256 in hex")
    tests = reader.get("test", dict)
    precision = reader.get("precision", str) if "precision" in document else "float32"
    if precision not in ("float32", *STORED_PRECISIONS):
        raise CheckpointError(f"{file}: precision must be float32 or {', '.join(STORED_PRECISIONS)}, got "
                              f"{precision!r}; reinstall sgps")  # fmt: skip
    return ModelCard(
        folder=folder,
        name=reader.get("name", str),
        version=reader.get("version", int),
        summary=reader.get("summary", str),
        domain=reader.get("domain", str),
        variant=reader.get("variant", str),
        observation_shape=(shape[0], shape[1], shape[2]),
        algorithm=reader.get("algorithm", str),
        preset=reader.get("preset", str),
        precision=precision,
        recipe=reader.get("recipe", str),
        sgps_version=reader.get("sgps_version", str),
        made=reader.get("made", str),
        training=reader.get("training", dict),
        tests=tuple(_test_record(file, name, row) for name, row in tests.items()),
        digests=digests,
    )


class _Fields:
    """Typed reads of a card's keys, each failure naming the file and the key."""

    def __init__(self, file: Path, document: Mapping[str, Any]) -> None:
        self.file, self.document = file, document

    def get(self, key: str, kind: type) -> Any:
        value = self.document.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CheckpointError(f"{self.file}: {key} must be a {kind.__name__}, got {value!r}; reinstall sgps")
        return value


def _test_record(file: Path, name: str, row: Any) -> TestRecord:
    """One ``[test.NAME]`` table of a card."""
    if not isinstance(row, Mapping):
        raise CheckpointError(f"{file}: test.{name} must be a table")
    fields = _Fields(file, row)
    means = {}
    for key in ("mean_expansions", "mean_length"):
        value = row.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise CheckpointError(f"{file}: test.{name}.{key} must be a number, got {value!r}")
        means[key] = None if value is None else float(value)
    return TestRecord(name, fields.get("levels", str), fields.get("budget", int), fields.get("rounds", int),
                      fields.get("solved", int), fields.get("total", int), means["mean_expansions"],
                      means["mean_length"], fields.get("within_first_budget", int))  # fmt: skip
