"""The comparison config of `sgps compare`: its schema, its checks and the runs it names.

A comparison config is a TOML file (docs/experiments.md)::

    [compare]              domain, algorithms (algorithm or variant names), seeds, preset
    [problems.train]       the training set: generated, or read from a level file or folder
    [problems.validation]  optional; otherwise `validation` problems of the training set are
                           held out, split by each run's seed (spec/algorithms.md 6.1)
    [problems.hips]        optional: more levels for HIPS-ε, which learns offline from the
                           solver's solutions of the training set and of these
    [tests.NAME]           a test set, with the test procedure's budget and rounds (6.7)
    [train.SECTION]        overrides of `sgps train`'s configuration, for every run
    [variants.NAME]        a named variant: `algorithm` and its own overrides
    [paper.NAME]           the paper's numbers, shown beside ours in the report

Every key is checked before anything is written or started; a bad one is a
`ConfigError` that reads ``CONFIG: section.key: problem``. The resolved config (with
defaults filled in and file paths made absolute) is what ``DIR/compare.toml`` holds.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.domains import domain_names, get_domain, read_levels
from sgps.domains.base import Domain
from sgps.domains.generation import MAX_LEVELS, generate_levels, resolve_params
from sgps.domains.levels import generated_set
from sgps.errors import ConfigError, SgpsError
from sgps.training.config import PRESETS, SECTIONS, TrainConfig, read_toml, resolve_config
from sgps.training.methods.hips import run as hips
from sgps.training.recipes import AUTO, PAPER, chosen_recipe
from sgps.training.schema import ALGORITHMS, InvalidSettingError, check_value
from sgps.training.setup import split_problems

#: Settings of a run that the comparison itself decides, and where they come from.
SET_BY_COMPARE = {
    ("run", "algorithm"): "compare.algorithms",
    ("run", "domain"): "compare.domain",
    ("run", "workers"): "the concurrency plan",
    ("bootstrap", "seed"): "compare.seeds",
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_REQUIRED = object()


@dataclass(frozen=True)
class ProblemSource:
    """A problem set: `count` levels generated from seeds `seed`, `seed + 1`, ... of a generator
    variant, or levels `first` to `first + count` of a level file or folder (all by default)."""

    variant: str | None = None
    seed: int = 0
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    file: Path | None = None
    first: int = 0
    count: int | None = None

    def resolved(self) -> dict[str, Any]:
        """The source as ``compare.toml`` records it."""
        if self.file is not None:
            entry: dict[str, Any] = {"file": str(self.file), "first": self.first}
            return entry if self.count is None else {**entry, "count": self.count}
        return {"variant": self.variant, "seed": self.seed, "count": self.count, "params": dict(self.params)}

    def load(self, domain: Domain[Any], where: str) -> list[Any]:
        """The set's initial states; a `ConfigError` naming `where` if a file holds too few levels."""
        if self.file is None:
            params = resolve_params(domain, self.variant or "standard", self.params)
            return generate_levels(domain, params, self.seed, self.count or 0)
        states = read_levels(self.file, domain).states()
        end = len(states) if self.count is None else self.first + self.count
        if end > len(states) or self.first >= len(states):
            raise ConfigError(f"{where}.count: {self.file} holds {len(states)} levels, not first + count = {end}")
        return states[self.first : end]


@dataclass(frozen=True)
class TestSet:
    """A named test set and the test procedure's settings: round r searches with budget * 2^(r-1)."""

    name: str
    source: ProblemSource
    budget: int = 4000
    rounds: int = 1


@dataclass(frozen=True)
class PaperNumbers:
    """What the paper reports for one algorithm (spec/algorithms.md 10.2-10.6)."""

    test: tuple[float, ...] = ()  # solved, or solved / mean expansions / mean length
    train: tuple[float, ...] = ()  # total expansions / hours / training problems solved
    distance: float | None = None  # mean subgoal distance (cluster-level ablation)


@dataclass(frozen=True)
class RunSpec:
    """One (algorithm or variant, seed) of the comparison; its run directory is ``runs/NAME``."""

    name: str
    variant: str
    algorithm: str
    seed: int
    config: TrainConfig | None  # None for HIPS-ε, which trains offline (`hips`)
    hips: Mapping[str, Any] | None = None  # HIPS-ε: the [hips] settings over the preset

@dataclass(frozen=True)
class ComparePlan:
    """A checked comparison config: problem sets, test sets and every run."""

    domain: str
    variants: tuple[str, ...]  # compare.algorithms, in the config's order
    seeds: tuple[int, ...]
    train: ProblemSource
    held_out: int  # training problems held out for validation (0: see `validation`)
    validation: ProblemSource | None
    tests: tuple[TestSet, ...]
    runs: tuple[RunSpec, ...]
    paper: Mapping[str, PaperNumbers]
    resolved: Mapping[str, Any]  # what compare.toml holds
    hips_extra: ProblemSource | None = None  # [problems.hips]: more levels for HIPS-ε's offline data

    def train_count(self, run: RunSpec, total: int) -> int:
        """Training problems of `run` when the training set holds `total` (validation split off)."""
        if self.validation is not None or run.config is None:  # HIPS-ε solves and learns from every one
            return total
        return len(split_problems(list(range(total)), run.config.run.validation_fraction, run.seed)[0])

    def algorithm_of(self, variant: str) -> str:
        return next(run.algorithm for run in self.runs if run.variant == variant)


def read_plan(path: Path, *, check_files: bool = True, recorded: bool = False) -> ComparePlan:
    """Read and check a comparison config; relative file paths are relative to the config's folder.

    `check_files` also checks that level files exist (not needed to report on finished runs).
    `recorded`: `path` is a comparison's own compare.toml (see `parse_plan`).
    """
    document = read_toml(path)
    return parse_plan(document, str(path), path.resolve().parent, check_files=check_files, recorded=recorded)


def parse_plan(
    document: Mapping[str, Any], origin: str, base: Path, *, check_files: bool = True, recorded: bool = False
) -> ComparePlan:
    """Check a parsed comparison config; errors read ``ORIGIN: section.key: problem``.

    The plan records the recipe of its runs (`run.recipe`, `sgps.training.recipes`) as chosen,
    never "auto": a config that names none trains with the recipe "auto" picks for its
    training levels. A `recorded` document (a comparison's own compare.toml) that names none
    was written before recipes had names, when every comparison trained with the paper's loop.
    """
    top = _Table(origin, "", document)
    head = top.table("compare")
    domain_name = head.string("domain")
    if domain_name not in domain_names():
        raise head.error("domain", f"unknown domain {domain_name!r} (domains: {', '.join(domain_names())})")
    domain = get_domain(domain_name)
    preset = head.string("preset", "cpu")
    if preset not in PRESETS:
        raise head.error("preset", f"unknown preset {preset!r} (presets: {', '.join(PRESETS)})")
    names = head.names("algorithms")
    seeds = head.integers("seeds", [0])
    head.finish()

    variant_tables = top.table("variants", {})
    variants: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {}
    for name in variant_tables.values:
        if name not in names:
            raise variant_tables.error(name, "not listed in compare.algorithms")
        variants[name] = _variant(variant_tables.table(name), name)
    variant_tables.finish()
    for name in names:
        if name == hips.ALGORITHM:  # trained offline: no training config to vary
            continue
        if name not in ALGORITHMS and name not in variants:
            known = ", ".join((*ALGORITHMS, hips.ALGORITHM))
            raise head.error("algorithms", f"unknown algorithm {name!r} (algorithms: {known}, or a [variants] name)")
        variants.setdefault(name, (name, {}))

    problems = top.table("problems")
    train_table = problems.table("train")
    held_out = train_table.integer("validation", 0, minimum=1)
    train = _source(train_table, base, domain, check_files)
    validation = None
    if "validation" in problems.values:
        if held_out:
            raise train_table.error("validation", "give either problems.train.validation or [problems.validation]")
        validation = _source(problems.table("validation"), base, domain, check_files)
    hips_extra = None
    if "hips" in problems.values:
        if hips.ALGORITHM not in names:
            raise problems.error("hips", f"levels for {hips.ALGORITHM}, which compare.algorithms does not list")
        hips_extra = _source(problems.table("hips"), base, domain, check_files)
    problems.finish()
    if held_out and train.count is None:
        raise train_table.error("count", "needed to hold out problems.train.validation problems")
    if held_out and held_out >= (train.count or 0):
        raise train_table.error("validation", f"must be less than problems.train.count ({train.count})")

    test_tables = top.table("tests")
    tests = tuple(_test_set(test_tables, name, base, domain, check_files) for name in test_tables.values)
    test_tables.finish()
    if not tests:
        raise top.error("tests", "name at least one test set, e.g. [tests.test]")
    if hips_extra is not None:
        others = [("problems.train", train), *((f"tests.{t.name}", t.source) for t in tests)]
        if validation is not None:
            others.append(("problems.validation", validation))
        for where, source in others:
            if _same_levels_drawn(hips_extra, source, domain):
                raise problems.error("hips", f"its generator seeds overlap those of {where}; choose other seeds")

    overrides = _overrides(top.table("train", {}))
    training_set = (domain_name, train.variant or "standard") if train.file is None else generated_set(train.file)
    overrides.setdefault("run", {}).setdefault("recipe", PAPER if recorded else AUTO)
    for sections in (overrides, *(own for _, own in variants.values())):
        if "recipe" in sections.get("run", {}):
            sections["run"]["recipe"] = chosen_recipe(sections["run"]["recipe"], training_set)
    if held_out:
        for where, sections in [("train", overrides), *((f"variants.{n}", v[1]) for n, v in variants.items())]:
            if "validation_fraction" in sections.get("run", {}):
                raise ConfigError(f"{origin}: {where}.run.validation_fraction: set by problems.train.validation")
    hips_settings = _hips_settings(top, preset, hips.ALGORITHM in names)
    runs = tuple(
        RunSpec(f"{name}-s{seed}", name, name, seed, None, hips_settings)
        if name == hips.ALGORITHM
        else _run(origin, name, seed, variants[name], overrides, preset, domain_name, held_out, train.count)
        for seed in seeds
        for name in names
    )

    paper_tables = top.table("paper", {})
    paper = {name: _paper(paper_tables, name, names) for name in paper_tables.values}
    paper_tables.finish()
    top.finish()

    resolved: dict[str, Any] = {
        "compare": {"domain": domain_name, "algorithms": list(names), "seeds": list(seeds), "preset": preset},
        "problems": {"train": {**train.resolved(), **({"validation": held_out} if held_out else {})}},
        "tests": {t.name: {**t.source.resolved(), "budget": t.budget, "rounds": t.rounds} for t in tests},
        "train": overrides,
        "variants": {name: {"algorithm": algorithm, **extra} for name, (algorithm, extra) in variants.items()},
        "paper": {name: _paper_entry(numbers) for name, numbers in paper.items()},
    }
    if hips_settings:
        resolved["hips"] = dict(hips_settings)
    if validation is not None:
        resolved["problems"]["validation"] = validation.resolved()
    if hips_extra is not None:
        resolved["problems"]["hips"] = hips_extra.resolved()
    return ComparePlan(domain_name, tuple(names), tuple(seeds), train, held_out, validation, tests, runs, paper,
                       resolved, hips_extra)  # fmt: skip


def _same_levels_drawn(one: ProblemSource, other: ProblemSource, domain: Domain[Any]) -> bool:
    """Whether two generated sets share a level: the same generator parameters and overlapping seeds."""
    if one.file is not None or other.file is not None:
        return False
    if resolve_params(domain, one.variant, one.params) != resolve_params(domain, other.variant, other.params):
        return False
    return one.seed < other.seed + (other.count or 0) and other.seed < one.seed + (one.count or 0)


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose values differ between two resolved configs (the paper's numbers aside)."""
    flat_old, flat_new = _flatten(old), _flatten(new)
    keys = sorted(set(flat_old) | set(flat_new))
    return [key for key in keys if not key.startswith("paper.") and flat_old.get(key) != flat_new.get(key)]


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


# -- sections -------------------------------------------------------------------------


def _variant(table: _Table, name: str) -> tuple[str, dict[str, dict[str, Any]]]:
    default = name if name in ALGORITHMS else _REQUIRED
    algorithm = table.string("algorithm", default)
    if algorithm not in ALGORITHMS:
        raise table.error("algorithm", f"unknown algorithm {algorithm!r} (algorithms: {', '.join(ALGORITHMS)})")
    if name in ALGORITHMS and algorithm != name:
        raise table.error("algorithm", f"a variant named after an algorithm runs that algorithm ({name})")
    table.seen.add("algorithm")
    return algorithm, _overrides(table, skip=("algorithm",))


def _overrides(table: _Table, skip: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Overrides of `sgps train`'s sections, each key checked alone against `sgps.training.schema`'s rules."""
    overrides: dict[str, dict[str, Any]] = {}
    for section in table.values:
        if section in skip:
            continue
        if section not in SECTIONS:
            sections = ", ".join(SECTIONS)
            raise table.error(section, f"unknown section of the training config (sections: {sections})")
        entries = table.table(section)
        keys = [field.name for field in dataclasses.fields(SECTIONS[section])]
        for key in entries.values:
            if key not in keys:
                raise entries.error(key, f"unknown key (keys: {', '.join(keys)})")
            if (section, key) in SET_BY_COMPARE:
                raise entries.error(key, f"set by {SET_BY_COMPARE[section, key]}, not here")
            try:
                checked = check_value(section, key, entries.values[key])
            except InvalidSettingError as error:
                raise entries.error(key, error.problem) from None
            entries.seen.add(key)
            overrides.setdefault(section, {})[key] = checked
        entries.finish()
    table.finish()
    return overrides


def _run(
    origin: str,
    name: str,
    seed: int,
    variant: tuple[str, dict[str, dict[str, Any]]],
    shared: Mapping[str, Mapping[str, Any]],
    preset: str,
    domain: str,
    held_out: int,
    train_count: int | None,
) -> RunSpec:
    algorithm, own = variant
    merged: dict[str, dict[str, Any]] = {section: dict(values) for section, values in shared.items()}
    for section, values in own.items():
        merged.setdefault(section, {}).update(values)
    merged.setdefault("run", {}).update({"algorithm": algorithm, "domain": domain, "workers": 1})
    merged.setdefault("bootstrap", {})["seed"] = seed
    if held_out and train_count:
        merged["run"]["validation_fraction"] = held_out / train_count
    try:
        config = resolve_config(preset, overrides=merged)
    except SgpsError as error:
        raise ConfigError(f"{origin}: {'variants.' + name if own else 'train'}: {error}") from None
    return RunSpec(f"{name}-s{seed}", name, algorithm, seed, config)


def _hips_settings(top: _Table, preset: str, used: bool) -> dict[str, Any]:
    """The `[hips]` table (HIPS-ε's settings over the preset), checked; only with hips-eps in compare.algorithms."""
    if "hips" not in top.values:
        return {}
    table = top.table("hips")
    if not used:
        raise top.error("hips", f"settings of {hips.ALGORITHM}, which compare.algorithms does not list")
    hips.resolve_settings(preset, None, table.values, origin=table.origin)  # checks every key
    return dict(table.values)


def _source(table: _Table, base: Path, domain: Domain[Any], check_files: bool) -> ProblemSource:
    if "file" in table.values:
        path = (base / table.string("file")).resolve()
        if check_files and not path.exists():
            raise table.error("file", f"no such level file or folder: {path}")
        source = ProblemSource(file=path, first=table.integer("first", 0), count=table.integer("count", None, 1))
    else:
        variant = table.string("variant", "standard")
        if variant not in domain.variants:
            known = ", ".join(domain.variants) or "none"
            raise table.error("variant", f"{domain.name} has no generator variant {variant!r} (variants: {known})")
        params = dict(table.table("params", {}).values)
        try:
            resolve_params(domain, variant, params)
        except ConfigError as error:
            raise table.error("params", str(error)) from None
        source = ProblemSource(variant=variant, seed=table.integer("seed", 0), params=params,
                               count=table.integer("count", _REQUIRED, 1, MAX_LEVELS))  # fmt: skip
    table.finish()
    return source


def _test_set(tables: _Table, name: str, base: Path, domain: Domain[Any], check_files: bool) -> TestSet:
    if not _NAME.fullmatch(name):
        raise tables.error(name, "a test set name holds letters, digits, '-' and '_' only")
    table = tables.table(name)
    budget, rounds = table.integer("budget", 4000, 1), table.integer("rounds", 1, 1)
    test = TestSet(name, _source(table, base, domain, check_files), budget, rounds)
    table.finish()
    return test


def _paper(tables: _Table, name: str, names: Sequence[str]) -> PaperNumbers:
    if name not in names:
        raise tables.error(name, "not listed in compare.algorithms")
    table = tables.table(name)
    test = table.numbers("test", ())
    if len(test) not in (0, 1, 3):
        raise table.error("test", "give [solved] or [solved, mean expansions, mean length]")
    train = table.numbers("train", ())
    if len(train) not in (0, 3):
        raise table.error("train", "give [total expansions, hours, training problems solved]")
    distance = table.number("distance", None)
    table.finish()
    return PaperNumbers(tuple(test), tuple(train), distance)


def _paper_entry(numbers: PaperNumbers) -> dict[str, Any]:
    entry: dict[str, Any] = {"test": list(numbers.test), "train": list(numbers.train)}
    return entry if numbers.distance is None else {**entry, "distance": numbers.distance}


class _Table:
    """One table of the config, read key by key; its errors name ``where.key``."""

    def __init__(self, origin: str, where: str, values: Any) -> None:
        self.origin, self.where = origin, where
        if not isinstance(values, Mapping):
            raise ConfigError(f"{origin}: {where}: must be a table")
        self.values: Mapping[str, Any] = values
        self.seen: set[str] = set()

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.origin}: {self.where + '.' if self.where else ''}{key}: {problem}")

    def finish(self) -> None:
        """Refuse keys nobody asked for."""
        unknown = [key for key in self.values if key not in self.seen]
        if unknown:
            kind = "key" if self.where else "section"
            known = ", ".join(sorted(self.seen)) or "none"
            raise self.error(unknown[0], f"unknown {kind} ({kind}s here: {known})")

    def _get(self, key: str, default: Any) -> Any:
        self.seen.add(key)
        if key not in self.values:
            if default is _REQUIRED:
                raise self.error(key, "missing")
            return default
        return self.values[key]

    def table(self, key: str, default: Any = _REQUIRED) -> _Table:
        path = f"{self.where}.{key}" if self.where else key
        return _Table(self.origin, path, self._get(key, default))

    def typed(self, key: str, expected: type) -> Any:
        """The value of `key` as `expected` (int, float, bool or str); ints pass as floats."""
        value = self._get(key, _REQUIRED)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, expected) and (expected is bool or not isinstance(value, bool)):
            return value
        raise self.error(key, f"must be {_KINDS.get(expected, expected.__name__)}, got {value!r}")

    def string(self, key: str, default: Any = _REQUIRED) -> Any:
        return self.typed(key, str) if key in self.values else self._get(key, default)

    def integer(self, key: str, default: Any = _REQUIRED, minimum: int = 0, maximum: int | None = None) -> Any:
        if key not in self.values:
            return self._get(key, default)
        value = self.typed(key, int)
        if value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be at most {maximum:,}, got {value:,}")
        return value

    def number(self, key: str, default: Any = _REQUIRED) -> Any:
        """A finite number >= 0 (the paper's counts, means and distances)."""
        if key not in self.values:
            return self._get(key, default)
        value = self.typed(key, float)
        if not _is_measure(value):
            raise self.error(key, f"must be a finite number >= 0, got {value!r}")
        return value

    def numbers(self, key: str, default: Any = _REQUIRED) -> Any:
        """A list of finite numbers >= 0."""
        value = self._get(key, default)
        if not isinstance(value, list | tuple) or not all(_is_measure(item) for item in value):
            raise self.error(key, f"must be a list of finite numbers >= 0, got {value!r}")
        return [float(item) for item in value]

    def integers(self, key: str, default: Any = _REQUIRED) -> list[int]:
        value = self._get(key, default)
        if not isinstance(value, list) or not value or not all(_is_int(item) and item >= 0 for item in value):
            raise self.error(key, f"must be a non-empty list of integers >= 0, got {value!r}")
        if len(set(value)) != len(value):
            raise self.error(key, "lists a value twice")
        return list(value)

    def names(self, key: str) -> list[str]:
        value = self._get(key, _REQUIRED)
        if not isinstance(value, list) or not value or not all(isinstance(item, str) for item in value):
            raise self.error(key, f"must be a non-empty list of names, got {value!r}")
        for item in value:
            if not _NAME.fullmatch(item):
                raise self.error(key, f"{item!r}: a name holds letters, digits, '-' and '_' only")
        if len(set(value)) != len(value):
            raise self.error(key, "lists a name twice")
        return list(value)


_KINDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_measure(value: Any) -> bool:
    """A number that a table can print: finite and not negative (NaN is neither)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
