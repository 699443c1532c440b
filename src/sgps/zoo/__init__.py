"""Pretrained models: trained runs that install with the package and load by name.

A model is a named, versioned artefact: a run folder's configuration and weights with a
card (`cards.ModelCard`) that says what it solves, how it was trained and how it tested,
and holds the checksums of its files. ``sgps models`` lists them; wherever a command or
`sgps.load` takes a run folder, a model's name is taken too (`locate`), and ``sgps solve
FILE --model NAME`` searches a level with one. `build.build_model` makes one from a run.
"""

from __future__ import annotations

from pathlib import Path

from sgps.zoo.cards import MODELS, ModelCard, TestRecord, card_of, find, is_model_name, names, read_card

__all__ = ["MODELS", "ModelCard", "TestRecord", "available", "locate"]


def available() -> list[ModelCard]:
    """The cards of the installed models, in name order (their files are checked when one is opened)."""
    return [read_card(MODELS / name) for name in names()]


def locate(run: str | Path) -> tuple[Path, ModelCard | None]:
    """The folder a command should open for `run`, and the model's checked card when it is a model.

    An existing path is taken as it is (a model's folder given by its path is still a model);
    otherwise a string shaped like a model name is looked up among the installed models, and
    an unknown one is refused with the list of models. Anything else comes back unchanged, for
    the caller's own "no such run folder" message.
    """
    path = Path(run)
    if path.exists():
        return path, card_of(path)
    if isinstance(run, str) and is_model_name(run):
        card = find(run)
        return card.folder, card
    return path, None
