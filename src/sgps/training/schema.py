"""The rules of a training configuration: each key's type and allowed values, and the rules between keys.

`RULES` gives every key of every section a pydantic type: strict (an integer is not a
float written as 3.0, a flag is ``true`` or ``false``), bounded (counts at least 1, sizes
below a cap that keeps a network allocatable, numbers finite) and described in words.
The rules between keys of a section are the sections' model validators. Every error
is an `InvalidSettingError` that reads ``section.key must be REQUIREMENT, got VALUE``.

Checking happens before a run creates anything, and the same rules serve the TOML
file, the command-line flags, `sgps.train`'s arguments, the ``[train]`` tables of a
comparison config and HIPS-ε's ``[hips]`` section. This is the one place a setting's
type and range are checked: the settings dataclasses hold values, they do not re-check them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    create_model,
    model_validator,
)

from sgps.domains.registry import domain_names
from sgps.errors import ConfigError
from sgps.models.precision import PRECISIONS
from sgps.models.subgoal import CONDITIONINGS, MIXTURES, REDUCE_ACTIVATIONS
from sgps.models.vqvae import CODEBOOKS
from sgps.search.costs import DUPLICATE_RULES
from sgps.training.budget import SCHEDULES
from sgps.training.methods.flat.samples import LOSSES
from sgps.training.methods.subgoal.clustering import HIERARCHIES
from sgps.training.methods.subgoal.drawing import TREE_RNGS
from sgps.training.methods.subgoal.learner import CODE_OBJECTIVES, current_spelling
from sgps.training.methods.subgoal.samples import SEGMENTATIONS, SUBGOAL_TARGETS
from sgps.training.recipes import RECIPE_CHOICES

#: Caps on network sizes: far above any useful value, low enough to fail here, not in the allocator.
MAX_WIDTH = 4096  # channels, hidden units, code dimension
MAX_BLOCKS = 64  # residual blocks
MAX_SEED = 2**64 - 1  # seeds are 64-bit unsigned integers
MAX_COUNT = 10**9  # epochs, minibatch sizes, buffers: larger is a typo
MAX_EVALUATION_BATCH = 4096  # children a search gathers before evaluating them

#: Algorithms `sgps train` knows: the flat baselines and the subgoal-guided policies.
ALGORITHMS = ("phs", "levin", "wastar", "phs-sg", "levin-sg")
#: Where the searches of a pool of processes are evaluated (`run.evaluator`): by one shared
#: evaluator (`sgps.execution.shared`), by a model copy in each process, or "auto"
#: (`sgps.training.setup.evaluator_place`).
EVALUATOR_PLACES = ("auto", "shared", "per-process")


class InvalidSettingError(ConfigError):
    """A configuration value that breaks a rule; `key` is ``section.key``, `problem` the rest of the message."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"{key} {problem}")


def _integer(low: int, high: int = MAX_COUNT, note: str = "") -> Any:
    """An integer from `low` to `high`, both included."""
    text = f"an integer from {low} to {high:,}{note}"
    return Annotated[int, Field(strict=True, ge=low, le=high, description=text)]


def _number(low: float, high: float = math.inf, *, open_low: bool = False, open_high: bool = False) -> Any:
    """A finite number between `low` and `high`, each bound included unless said open."""
    if high == math.inf:
        text = f"a finite number {'>' if open_low else '>='} {low:g}"
    else:
        text = f"in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
    bounds = {"gt" if open_low else "ge": low}
    if high != math.inf:
        bounds["lt" if open_high else "le"] = high
    return Annotated[float, Field(strict=True, allow_inf_nan=False, description=text, **bounds)]


def _choice(names: tuple[str, ...], renamed: str | None = None) -> Any:
    """One of `names`; `renamed` names a key whose old spellings are accepted with a warning."""
    text = f"one of {', '.join(names)}"
    checks: list[Any] = [Field(description=text)]
    if renamed is not None:
        checks.append(BeforeValidator(lambda value: _current(renamed, value)))
    return Annotated[Literal[names], *checks]


def _current(key: str, value: Any) -> Any:
    """A string value of `key` under its current spelling (warning when an old one was used)."""
    return current_spelling(key, value) if isinstance(value, str) else value


def _registered_domain(name: str) -> str:
    if name and name not in domain_names():
        raise ValueError(f"'' (the level files' domain) or one of {', '.join(domain_names())}")
    return name


FLAG = Annotated[bool, Field(strict=True, description="true or false")]
DOMAIN = Annotated[str, Field(strict=True, description="a domain name"), AfterValidator(_registered_domain)]
WIDTH = _integer(1, MAX_WIDTH)
BLOCKS = _integer(0, MAX_BLOCKS)
COUNT = _integer(1)
FRACTION = _number(0.0, 1.0)
#: Adam's step size: a rate above 1 is a typo, and 1e308 overflows inside the optimiser.
LEARNING_RATE = _number(0.0, 1.0, open_low=True)

RULES: dict[str, dict[str, Any]] = {
    "run": {
        "domain": DOMAIN,
        "algorithm": _choice(ALGORITHMS),
        "device": _choice(("cpu", "cuda", "auto")),
        "validation_fraction": _number(0.0, 1.0, open_high=True),
        "workers": _integer(0, 1024, " (0: one per core)"),
        "evaluator": _choice(EVALUATOR_PLACES),
        "tensorboard": Annotated[str, Field(strict=True, description='a folder for TensorBoard events ("": none)')],
        "recipe": _choice(RECIPE_CHOICES),
    },
    "network": {"channels": WIDTH, "blocks": BLOCKS, "batch_norm": FLAG},
    "search": {
        "levin_plus_one": FLAG,
        "duplicates": _choice(DUPLICATE_RULES),
        "evaluation_batch": _integer(0, MAX_EVALUATION_BATCH, " (0: 1 on a CPU, 32 on a GPU)"),
        "precision": _choice(PRECISIONS),
    },
    "learner": {
        "learning_rate": LEARNING_RATE,
        "weight_decay": FRACTION,
        "epochs": COUNT,
        "minibatch": COUNT,
        "loss": _choice(LOSSES),
        "precision": _choice(PRECISIONS),
    },
    "bootstrap": {
        "seed": _integer(0, MAX_SEED),
        "batch_size": COUNT,
        "initial_budget": COUNT,
        "max_budget": _integer(0, note=" (0: no limit)"),
        "schedule": _choice(tuple(SCHEDULES)),
        "epsilon": FRACTION,
        "validation_ratio": _number(0.0, 1.0, open_low=True),
        "max_iterations": _integer(0, note=" (0: no limit)"),
        "time_limit_minutes": _number(0.0),
        "max_expansions": _integer(0, 2**63 - 1, " (0: no limit)"),
        "checkpoint_every": COUNT,
        "stop_when_all_solved": FLAG,
        "solution_memory": _integer(0, MAX_COUNT, " (0: each update learns from its batch alone)"),
        "validate_every": _integer(0, MAX_COUNT, " (0: validate at each pass end only)"),
    },
    "subgoal": {
        "conditioning": _choice(CONDITIONINGS, renamed="conditioning"),
        "mixture": _choice(MIXTURES),
        "alpha_train": FRACTION,
        "alpha_test": FRACTION,
        "codebook_size": _integer(1, 1024),
        "codebook": _choice(CODEBOOKS),
        "code_dim": WIDTH,
        "commitment": _number(0.0, 1e6),
        "vq_channels": WIDTH,
        "vq_blocks": BLOCKS,
        "channels": WIDTH,
        "blocks": BLOCKS,
        "hidden": WIDTH,
        "unconditional_channels": WIDTH,
        "unconditional_blocks": BLOCKS,
        "reduce_activation": _choice(REDUCE_ACTIVATIONS),
        "failed_trees": FLAG,
        "exhausted_trees": FLAG,
        "normalise_low_weights": FLAG,
        "code_objective": _choice(CODE_OBJECTIVES),
        "action_weight": _number(0.0, 1e6),
        "hierarchy": _choice(HIERARCHIES, renamed="hierarchy"),
        "tree_rng": _choice(TREE_RNGS),
        "cluster_level": _integer(0, note=" (0: the rule ⌊L/2⌋-1)"),
        "resolution": _number(0.0),
        "pairs_per_tree": COUNT,
        "max_draws": COUNT,
        "length_buffer": COUNT,
        "segmentation": _choice(SEGMENTATIONS),
        "subgoal_target": _choice(SUBGOAL_TARGETS),
        "vq_minibatch": COUNT,
        "high_epochs": COUNT,
        "max_minibatches": COUNT,
        "probe_pairs": _integer(0, 4096, " (0: no probe)"),
    },
    "hips": {
        "channels": WIDTH,
        "blocks": BLOCKS,
        "codebook_size": _integer(1, 1024),
        "code_dim": WIDTH,
        "vq_channels": WIDTH,
        "vq_blocks": BLOCKS,
        "horizon": _integer(1, 1024),
        "segment_penalty": _number(0.0, 1e6),
        "discount": FRACTION,
        "learning_rate": LEARNING_RATE,
        "minibatch": COUNT,
        "warm_start_epochs": _integer(0),
        "segmentation_rounds": _integer(0),
        "epochs": _integer(0),
        "epsilon": _number(0.0, 1.0, open_low=True, open_high=True),
        "rollout_steps": _integer(0, note=" (0: 40, or 50 in TSP)"),
    },
}


class _Section(BaseModel):
    """A section's keys, all given (the caller fills in defaults) and checked together."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _Bootstrap(_Section):
    @model_validator(mode="after")
    def _budgets(self) -> _Bootstrap:
        max_budget, initial = self.__dict__["max_budget"], self.__dict__["initial_budget"]
        if max_budget and max_budget < initial:
            raise InvalidSettingError(
                "bootstrap.max_budget", f"must be 0 (no limit) or at least bootstrap.initial_budget ({initial}), "
                f"got {max_budget}"
            )
        return self


_BASES: dict[str, type[_Section]] = {"bootstrap": _Bootstrap}
_MODELS: dict[str, type[_Section]] = {
    section: create_model(
        f"{section.title()}Section",
        __base__=_BASES.get(section, _Section),
        **{key: (rule, ...) for key, rule in keys.items()},
    )
    for section, keys in RULES.items()
}


def validate_section(section: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """All keys of `section` checked against its rules and each other; the values in their canonical form."""
    try:
        return _MODELS[section].model_validate(dict(values)).model_dump()
    except ValidationError as error:
        first = error.errors()[0]
        key = str(first["loc"][0])
        raise _invalid(section, key, first) from None


def check_value(section: str, key: str, value: Any) -> Any:
    """One key of `section` checked alone (the rules between keys wait for the whole section)."""
    try:
        return _adapter(section, key).validate_python(value)
    except ValidationError as error:
        raise _invalid(section, key, error.errors()[0]) from None


@cache
def _adapter(section: str, key: str) -> TypeAdapter[Any]:
    return TypeAdapter(RULES[section][key])


def _invalid(section: str, key: str, error: Mapping[str, Any]) -> InvalidSettingError:
    """The `InvalidSettingError` of one pydantic error: the rule's own words, or its description."""
    if error["type"] == "value_error":
        requirement = str(error["ctx"]["error"])
    else:
        requirement = _MODELS[section].model_fields[key].description or "valid"
    return InvalidSettingError(f"{section}.{key}", f"must be {requirement}, got {error['input']!r}")
