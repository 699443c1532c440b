"""Run configuration: presets, TOML files and command-line overrides, checked key by key.

A configuration has sections, each a dataclass: ``[run]`` (`RunSettings`),
``[network]`` (`NetworkSettings`, the flat baselines' network), ``[search]``
(`SearchSettings`, variants of the search itself), ``[learner]``
(`LearnerConfig`), ``[bootstrap]`` (`BootstrapConfig`) and ``[subgoal]``
(`SubgoalSettings`, the π^SG networks and how they learn; read by phs-sg and
levin-sg only). Resolution order: the preset's
values, then the recipe's (`sgps.training.recipes`), then the TOML file, then command-line
flags; `sgps.training.schema` holds the
rules every value is checked against. The resolved configuration is written to the run
directory's ``config.toml``.
"""

from __future__ import annotations

import codecs
import dataclasses
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from sgps.errors import ConfigError
from sgps.fileio import MAX_DOCUMENT_BYTES, DocumentLimitError, open_regular, parse_toml_text
from sgps.training.bootstrap import BootstrapConfig
from sgps.training.methods.flat.learner import LearnerConfig
from sgps.training.methods.subgoal.learner import SubgoalSettings
from sgps.training.recipes import AUTO, PAPER, RECIPES, chosen_recipe
from sgps.training.schema import ALGORITHMS, InvalidSettingError, check_value, validate_section


@dataclass(frozen=True)
class NetworkSettings:
    """ResNet size of the flat network."""

    channels: int = 128
    blocks: int = 8
    batch_norm: bool = False


@dataclass(frozen=True)
class SearchSettings:
    """Variants of the training, validation and test searches (defaults: the reference code's)."""

    levin_plus_one: bool = False  # LevinTS orders by (d + 1)/π (the paper) instead of g/π (the code)
    duplicates: str = "eager"  # eager: first generated copy wins (code); lazy: closed set over expanded (paper)
    #: Children each search gathers before one evaluation call: 1 is exact best-first order;
    #: k > 1 the reference's buffered order (its trainer's `inference_batch_size`, 32); 0 picks
    #: by device when a run starts (`sgps.training.setup.default_evaluation_batch`).
    evaluation_batch: int = 0
    precision: str = "float32"  # of search evaluations (`sgps.models.precision`); learning: learner.precision


@dataclass(frozen=True)
class RunSettings:
    """What to train: domain, algorithm, device."""

    domain: str = ""  # "": the level files' domain (set when a run starts)
    algorithm: str = "phs"
    device: str = "auto"
    validation_fraction: float = 0.1  # of --problems, when no --validation file is given
    workers: int = 0  # search processes; 0: one per usable core (resolved when a run starts); 1: in-process
    #: Where a pool's searches are evaluated (`sgps.training.setup.evaluator_place`): "shared" (one
    #: evaluator in the training process, batching every worker's requests), "per-process"
    #: (a model copy on the CPU in each worker), or "auto" (shared on a GPU, copies on a CPU).
    evaluator: str = "auto"
    tensorboard: str = ""  # folder for TensorBoard event files ("": none; `sgps.training.tensorboard`)
    #: The training recipe (`sgps.training.recipes`): "auto" (the default) becomes the recipe measured
    #: fastest on the set the levels were generated as (`AUTO_RECIPES`), "paper" on others; a run's
    #: config.toml records the recipe chosen.
    recipe: str = AUTO


SECTIONS: dict[str, type] = {
    "run": RunSettings,
    "network": NetworkSettings,
    "search": SearchSettings,
    "learner": LearnerConfig,
    "bootstrap": BootstrapConfig,
    "subgoal": SubgoalSettings,
}

#: Presets: `tiny` for tests (seconds), `cpu` for a CPU-only machine, `paper` the reference sizes.
#: Each keeps the paper's compute matching: one π^SG evaluation (π_hi, π_low, π_unc + h) does
#: at most 1.2 times the arithmetic of one flat evaluation (the paper's sizes: about 1.1). At
#: `cpu` the flat network is 32 x 2; half its blocks would leave π_hi and π_low 32 x 1, but at
#: two blocks the three stems that read the observation weigh too much (1.25-1.44x), so they
#: are narrowed to 24 channels (a multiple of 8: the CPU convolution kernels pad other widths,
#: and 26 channels ran as slow as 32), and π_unc + h is 16 x 1 (half the channels): 0.78-0.99x
#: over the five domains. At `tiny` the flat network is 16 x 1 and each π^SG network 8 x 1. The
#: study that chose them: docs/subgoals.md, "Compute-matched π^SG"; the count: `sgps.models.cost`.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "run": {"workers": 1},
        "network": {"channels": 16, "blocks": 1},
        "learner": {"learning_rate": 3e-3, "epochs": 3, "minibatch": 64},
        "bootstrap": {"batch_size": 16, "initial_budget": 500, "max_iterations": 3},
        "subgoal": {
            "code_dim": 16,
            "vq_channels": 8,
            "vq_blocks": 1,
            "channels": 8,
            "blocks": 1,
            "hidden": 32,
            "unconditional_channels": 8,
            "unconditional_blocks": 1,
            "vq_minibatch": 32,
        },
    },
    "cpu": {
        "network": {"channels": 32, "blocks": 2},
        "learner": {"learning_rate": 1e-3},
        "bootstrap": {"initial_budget": 2000, "max_iterations": 10},
        "subgoal": {
            "code_dim": 32,
            "vq_channels": 32,
            "vq_blocks": 2,
            "channels": 24,
            "blocks": 1,
            "hidden": 128,
            "unconditional_channels": 16,
            "unconditional_blocks": 1,
        },
    },
    "paper": {},
}


@dataclass(frozen=True)
class TrainConfig:
    """The fully resolved configuration of a training run."""

    run: RunSettings
    network: NetworkSettings
    search: SearchSettings
    learner: LearnerConfig
    bootstrap: BootstrapConfig
    subgoal: SubgoalSettings

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}


HIPS = "hips-eps"  # `sgps.training.methods.hips.run.ALGORITHM`: offline, no Bootstrap
_ALL = (*ALGORITHMS, HIPS)
_POLICIES = ("phs", "levin", "phs-sg", "levin-sg")  # learn a policy (the Levin loss weights its samples)
_LEVIN = ("levin", "levin-sg")  # order nodes by LevinTS's cost
_SUBGOAL = ("phs-sg", "levin-sg")


class TrainOption(NamedTuple):
    """A setting `sgps train` and `sgps.train` also take as an option, and the algorithms it applies to."""

    section: str
    key: str
    algorithms: tuple[str, ...] = ALGORITHMS  # default: the Bootstrap algorithms, not HIPS-ε
    flag: str = ""  # the command-line spelling when it is not --NAME (e.g. --no-failed-trees)


#: The settings `sgps train` and `sgps.train` also take as options: option name -> `TrainOption`.
#: The one table of which option applies to which algorithm: an option given for an
#: algorithm it does not apply to is refused (`check_options_apply`), never ignored.
TRAIN_OPTIONS: dict[str, TrainOption] = {
    "algorithm": TrainOption("run", "algorithm", _ALL),
    "device": TrainOption("run", "device", _ALL),
    "workers": TrainOption("run", "workers"),
    "evaluator": TrainOption("run", "evaluator"),
    "tensorboard": TrainOption("run", "tensorboard"),
    "recipe": TrainOption("run", "recipe"),
    "seed": TrainOption("bootstrap", "seed", _ALL),
    "max_iterations": TrainOption("bootstrap", "max_iterations"),
    "time_limit": TrainOption("bootstrap", "time_limit_minutes"),
    "max_expansions": TrainOption("bootstrap", "max_expansions"),
    "levin_plus_one": TrainOption("search", "levin_plus_one", _LEVIN),
    "duplicates": TrainOption("search", "duplicates"),
    "evaluation_batch": TrainOption("search", "evaluation_batch"),
    "precision": TrainOption("search", "precision"),
    "loss": TrainOption("learner", "loss", _POLICIES),
    "learning_precision": TrainOption("learner", "precision"),
    "failed_trees": TrainOption("subgoal", "failed_trees", _SUBGOAL, "--no-failed-trees"),
    "codebook_size": TrainOption("subgoal", "codebook_size", _SUBGOAL),
    "cluster_level": TrainOption("subgoal", "cluster_level", _SUBGOAL),
    "conditioning": TrainOption("subgoal", "conditioning", _SUBGOAL),
    "codebook": TrainOption("subgoal", "codebook", _SUBGOAL),
    "mixture": TrainOption("subgoal", "mixture", _SUBGOAL),
}


#: Sections whose every key applies only to some algorithms (the others: to every Bootstrap algorithm,
#: except the keys `TRAIN_OPTIONS` restricts): the flat network's size, and π^SG's settings.
SECTION_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "network": tuple(name for name in ALGORITHMS if name not in _SUBGOAL),
    "subgoal": _SUBGOAL,
}


def key_algorithms(section: str, key: str) -> tuple[str, ...]:
    """The algorithms the setting `section.key` applies to (`TRAIN_OPTIONS`, then `SECTION_ALGORITHMS`)."""
    for option in TRAIN_OPTIONS.values():
        if (option.section, option.key) == (section, key):
            return option.algorithms
    return SECTION_ALGORITHMS.get(section, ALGORITHMS)


def applicable_settings(settings: Mapping[str, Mapping[str, Any]], algorithm: str) -> dict[str, dict[str, Any]]:
    """The sections and keys of `settings` that apply to `algorithm` (`key_algorithms`): a settings file a
    run of `algorithm` accepts as its `--config` (`sgps compare` writes its runs' files so)."""
    kept = {section: {key: value for key, value in entries.items() if algorithm in key_algorithms(section, key)}
            for section, entries in settings.items()}  # fmt: skip
    return {section: entries for section, entries in kept.items() if entries}


def check_keys_apply(algorithm: str, document: Mapping[str, Any], origin: str) -> None:
    """Refuse, in one `ConfigError` naming `origin`, the keys of a settings file that `algorithm` does not
    use, as the command line refuses such options (`check_options_apply`): they would be ignored."""
    unused = [f"{section}.{key}" for section, entries in document.items() if isinstance(entries, Mapping)
              for key in entries if section in SECTIONS and algorithm not in key_algorithms(section, key)]  # fmt: skip
    if unused:
        shown = ", ".join(unused[:5]) + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
        raise ConfigError(f"{origin}: {shown}: not used by the {algorithm} algorithm, so refused rather than "
                          "ignored (remove them, or train an algorithm they apply to)")  # fmt: skip


def option_flag(name: str) -> str:
    """How the command line spells the option `name` of `TRAIN_OPTIONS`."""
    return TRAIN_OPTIONS[name].flag or "--" + name.replace("_", "-")


def option_overrides(options: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The `resolve_config` overrides of the `TRAIN_OPTIONS` given in `options` (None: not given)."""
    overrides: dict[str, dict[str, Any]] = {}
    for name, value in options.items():
        if value is not None:
            option = TRAIN_OPTIONS[name]
            overrides.setdefault(option.section, {})[option.key] = value
    return overrides


def given_options(overrides: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """The `TRAIN_OPTIONS` names that `overrides` (from `option_overrides`) set."""
    return [name for name, option in TRAIN_OPTIONS.items() if option.key in (overrides or {}).get(option.section, {})]


def check_options_apply(algorithm: str, given: Iterable[str], spell: Callable[[str], str] = option_flag) -> None:
    """Refuse, in one `ConfigError`, the options in `given` that `algorithm` does not use.

    `spell`: how the caller's user named an option (the command line's flag by default;
    the Python API passes the argument's name).
    """
    unused = [name for name in given if algorithm not in TRAIN_OPTIONS[name].algorithms]
    if unused:
        names = ", ".join(spell(name) for name in unused)
        users = "; ".join(f"{spell(name)} applies to {', '.join(TRAIN_OPTIONS[name].algorithms)}" for name in unused)
        raise ConfigError(f"{names}: not used by the {algorithm} algorithm, so refused rather than ignored ({users})")


def resolve_config(
    preset: str = "cpu",
    file: Path | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    spell: Callable[[str], str] | None = None,
    *,
    document: Mapping[str, Any] | None = None,
    file_keys_apply: bool = False,
    generated_as: tuple[str, str] | None = None,
) -> TrainConfig:
    """Merge a preset, the recipe, an optional TOML file and overrides, then check them against `schema.RULES`.

    The recipe (`run.recipe`, `sgps.training.recipes`) is the one the file or the overrides
    name, "auto" by default, which chooses by `generated_as`: the (domain, generator
    variant) the training levels were generated as (their header's; None when unknown). Its settings
    replace the preset's and give way to the file's and the overrides'; the configuration
    records the recipe chosen, never "auto".
    `document`: the file's content when the caller has read it already (it is not read again).
    `file_keys_apply`: refuse the file's keys that the resolved algorithm does not use
    (`check_keys_apply`; a user's settings file, not a run's own config.toml, which lists every key).

    Raises `ConfigError` naming the source (file or command line), the section.key, the value
    and what is allowed, and, given `spell` (how the caller's user named a `TRAIN_OPTIONS`
    option), the option that set a bad override; nothing is created before this returns.
    """
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    values: dict[str, dict[str, Any]] = {name: dict(PRESETS[preset].get(name, {})) for name in SECTIONS}
    origins: dict[str, str] = {}
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if file is not None:
        document = read_toml(file) if document is None else document
        layers.append((str(file), document))
    if overrides:
        layers.append(("command line", overrides))
    for origin, layer in layers:
        for section, entries in layer.items():
            if section not in SECTIONS:
                raise ConfigError(f"{origin}: unknown section [{section}] (sections: {', '.join(SECTIONS)})")
            if not isinstance(entries, Mapping):
                raise ConfigError(f"{origin}: [{section}] must be a table of keys")
            keys = [field.name for field in dataclasses.fields(SECTIONS[section])]
            for key, value in entries.items():
                if key not in keys:
                    raise ConfigError(f"{origin}: unknown key {section}.{key} (keys: {', '.join(keys)})")
                try:  # each layer's value checked as it enters: a flag must not hide a bad value in the file
                    values[section][key] = check_value(section, key, value)
                except InvalidSettingError as error:
                    given = [name for name, option in TRAIN_OPTIONS.items() if option.section == section
                             and option.key == key]  # fmt: skip
                    by = f" (given as {spell(given[0])})" if spell and layer is overrides and given else ""
                    raise ConfigError(f"{origin}: {error}{by}") from None
                origins[f"{section}.{key}"] = origin
    recipe = chosen_recipe(values["run"].get("recipe", AUTO), generated_as)
    for section, entries in RECIPES[recipe].items():
        for key, value in entries.items():
            if f"{section}.{key}" not in origins:  # the file's and the command line's values win
                values[section][key] = value
                origins[f"{section}.{key}"] = f"recipe {recipe}"
    values["run"]["recipe"] = recipe
    sections = {}
    for name, cls in SECTIONS.items():
        try:
            checked = validate_section(name, {**dataclasses.asdict(cls()), **values[name]})
        except InvalidSettingError as error:
            raise ConfigError(f"{origins.get(error.key, f'preset {preset}')}: {error}") from None
        sections[name] = cls(**checked)
    config = TrainConfig(**sections)
    if file_keys_apply and document is not None:
        check_keys_apply(config.run.algorithm, document, str(file))
    return config


#: Settings added after runs were first written, with the value a run started before them
#: behaves as (it neither probed π_low nor logged to TensorBoard, the probe changes no
#: training, and it searched in exact order, learned in float32, drew its failed trees
#: from one stream per batch, fitted its codes on reconstruction alone, took its settings
#: from no recipe but the paper's loop, whatever it changed by hand or by fork, and rectified
#: its π^SG features as the reference does): a run's
#: config.toml without them is complete and takes these values. A new setting belongs here
#: with its old behaviour, or the archives on `main` could no longer be resumed.
LATER_SETTINGS: dict[tuple[str, str], Any] = {
    ("subgoal", "probe_pairs"): 16,
    ("run", "tensorboard"): "",
    ("run", "evaluator"): "auto",
    ("search", "evaluation_batch"): 1,
    ("search", "precision"): "float32",
    ("learner", "precision"): "float32",
    ("subgoal", "tree_rng"): "batch",
    ("subgoal", "code_objective"): "reconstruction",
    ("subgoal", "action_weight"): 1.0,
    ("bootstrap", "solution_memory"): 0,
    ("bootstrap", "validate_every"): 0,
    ("run", "recipe"): PAPER,
    ("subgoal", "reduce_activation"): "relu",
}


def load_run_config(
    file: Path, overrides: Mapping[str, Mapping[str, Any]] | None = None, *, document: Mapping[str, Any] | None = None
) -> TrainConfig:
    """A run directory's own ``config.toml``, which must list every setting (a run writes it in full).

    A key missing from it would otherwise take a preset's value without a word (an
    emptied file would become the `paper` preset, and the error would then blame the
    checkpoint); here it is an error naming the keys, unless it is one of the
    `LATER_SETTINGS`. The file is not rewritten. `overrides`: see `resolve_config`; `document`: the
    file's content when the caller has read it already (`sgps.runs.run.Run` reads it once).
    """
    if document is None:
        document = read_toml(file)
    absent = [
        (section, field.name)
        for section, cls in SECTIONS.items()
        for field in dataclasses.fields(cls)
        if not isinstance(document.get(section), Mapping) or field.name not in document[section]
    ]
    missing = [f"{section}.{key}" for section, key in absent if (section, key) not in LATER_SETTINGS]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ConfigError(
            f"{file}: the run's configuration is incomplete (missing {shown}); restore the file, "
            "or add the keys with their values (docs/training.md lists the defaults)"
        )
    completed: dict[str, dict[str, Any]] = {}
    for section, key in absent:
        completed.setdefault(section, {})[key] = LATER_SETTINGS[(section, key)]
    for section, entries in (overrides or {}).items():
        completed.setdefault(section, {}).update(entries)
    return resolve_config("paper", file, completed, document=document)


def read_toml(file: Path) -> dict[str, Any]:
    """A TOML file's document; a `ConfigError` when it is missing, not a regular file, not UTF-8 or not TOML."""
    if file.exists() and not file.is_file():
        raise ConfigError(f"{file}: not a regular file")
    try:
        with open_regular(file, "rb") as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such config file") from None
    except OSError as error:
        raise ConfigError(f"{file}: cannot be read ({error.strerror or error})") from None
    return parse_toml(data, file)


def parse_toml(data: bytes, file: Path) -> dict[str, Any]:
    """The TOML document of `data`, the bytes of `file` (named in a `ConfigError` when they are not UTF-8 or
    not TOML). A UTF-8 byte-order mark that begins the file (some editors write one) is skipped, as in level files.
    """
    try:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{file}: not a UTF-8 text file (byte {error.start})") from None
    try:
        return parse_toml_text(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{file}: not valid TOML ({error})") from None
    except DocumentLimitError as error:
        raise ConfigError(f"{file}: not a settings file sgps reads ({error})") from None
