"""Training recipes: named sets of Bootstrap settings a run takes with one word (`run.recipe`, ``--recipe``).

A recipe is a layer of settings between the preset and the user's own settings: the
preset's values, then the recipe's, then the config file's, then the command line's
(`sgps.training.config.resolve_config`), so any one of its settings can still be changed.
The run's config.toml records the recipe's name beside the values it resolved to; a
resumed or forked run keeps both, so it trains on with the recipe it started with even
after a later sgps changes what the name means.

- ``paper``: the paper's Bootstrap loop (Algorithm 1 of the paper; spec/algorithms.md): each
  batch learns from its own searches alone, with the budget the preset or config gives.
- ``hard``: a search budget of 16,000 from the first batch and a solution memory of 32
  (`sgps.training.solution_memory`): each update also learns again from the latest 32
  solutions found. On hard BoulderDash the paper's loop solved its first training level
  after 36.61 M expansions and 5 of 10,000 after 92.46 M; with these two settings the same
  run solved 2,073 by 117.12 M, and at equal expansions from the same weights a run with
  the memory solved 62 of 608 searches where its twin without it solved 4
  (docs/results/hard-boulderdash-takeoff.md, "The control"). From random weights on a fresh
  hard BoulderDash training set, PHS*(π^SG) with both from the first batch solved its first
  level after 23.04 M expansions and 45 batches, against the paper's loop's 36.61 M and 286,
  10% of the 10,000 after 51.07 M and 123, 50% after 57.21 M and 248 and 90% after 69.14 M
  and 516, against the campaign's 113.45 M and 548, 123.52 M and 702 and 132.03 M and 892,
  and all 10,000 after 73.99 M and 626, where the paper's run needed 85.47 M
  (docs/results/recipes.md).
- ``memory``: the paper's loop with the solution memory of 32 alone (its budgets). On hard TSP
  with 8 cities PHS*(π^SG) solved all 317 training problems with 14.2%, 9.1% and 0.2% fewer
  expansions than the paper's loop on seeds 0-2, and with 14.3% fewer on 6 cities
  (docs/results/recipes.md).
- ``auto`` (the default): the recipe measured to learn fastest on the generated set the
  training levels come from (`AUTO_RECIPES`: ``hard`` on hard BoulderDash, where the memory
  made the take-off; ``memory`` on hard TSP, where the budget of 16,000 from the first batch
  costs π^SG most of its updates on 8 cities, 44 of 317 training problems at 4.22 M
  expansions against all 317 in 2.18 M, and the memory alone saves 0-14%;
  docs/results/recipes.md), ``paper`` on every other set, as the training file's ``; sgps
  domain=... variant=...`` header names it. Configs that reproduce the paper's numbers say
  ``recipe = "paper"``.
"""

from __future__ import annotations

from typing import Any

AUTO = "auto"
PAPER = "paper"
MEMORY = "memory"
HARD = "hard"

#: Recipe name -> the settings it sets, by section and key (the rest: the preset's).
RECIPES: dict[str, dict[str, dict[str, Any]]] = {
    PAPER: {},
    MEMORY: {"bootstrap": {"solution_memory": 32}},
    HARD: {"bootstrap": {"initial_budget": 16_000, "solution_memory": 32}},
}

#: What `run.recipe` may be: a recipe, or `AUTO` (chosen by the set the training levels were generated as).
RECIPE_CHOICES = (AUTO, *RECIPES)

#: What `AUTO` stands for on levels generated as (domain, generator variant); `PAPER` on any other set.
AUTO_RECIPES: dict[tuple[str, str], str] = {("boulderdash", "hard"): HARD, ("tsp", "hard"): MEMORY}


def chosen_recipe(name: str, generated_as: tuple[str, str] | None) -> str:
    """The recipe `name` stands for on training levels generated as the set `generated_as`, a
    (domain, generator variant) pair (None: levels sgps did not generate, or whose file does not say)."""
    if name != AUTO:
        return name
    return AUTO_RECIPES.get(generated_as, PAPER) if generated_as is not None else PAPER


def describe_recipe(name: str) -> str:
    """One line saying what the recipe `name` sets, for the run's log."""
    settings = ", ".join(f"{section}.{key} = {value!r}" for section, entries in RECIPES[name].items()
                         for key, value in entries.items())  # fmt: skip
    if not settings:
        return f"recipe {name}: the paper's Bootstrap loop"
    return f"recipe {name}: {settings}"
