"""Make (or replace) a pretrained model of the package from a trained run and its test records.

Test the weights first, on each level set the card will report, with the test procedure::

    sgps test RUN --problems official.txt --budget 4000 --rounds 8 --checkpoint RUN/checkpoints/latest.safetensors

then::

    python tools/make_model.py RUN hard-boulderdash --version 1 --preset cpu \\
        --summary "..." --recipe "..." --training-problems "..." \\
        --test official official.txt "the paper's 100 hard test levels (seeds 40000-40099)" \\
        --test fresh fresh.txt "100 generated hard levels no run has seen (seeds 70000-70099)"

The card's numbers are read from the records (`sgps.zoo.build`), which must be whole and
made with exactly the weights shipped. docs/models.md records the command of each model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sgps.errors import SgpsError
from sgps.zoo.build import CardLevels, build_model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the trained run folder")
    parser.add_argument("name", help="the model's name (lower-case words joined by hyphens)")
    parser.add_argument("--weights", type=Path, help="default: RUN/checkpoints/latest.safetensors")
    parser.add_argument("--version", type=int, required=True)
    parser.add_argument("--preset", required=True, help="the preset its networks were built with")
    parser.add_argument("--summary", required=True, help="one sentence")
    parser.add_argument("--recipe", required=True, help="the training recipe in words")
    parser.add_argument("--training-problems", required=True, help="the training problems in words")
    parser.add_argument("--test", nargs=3, action="append", required=True, metavar=("NAME", "FILE", "WORDS"))
    parser.add_argument("--budget", type=int, default=4000, help="first-round budget of the tests (default 4000)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds of the tests (default 8)")
    args = parser.parse_args()
    tests = [CardLevels(name, Path(file), words, args.budget, args.rounds) for name, file, words in args.test]
    try:
        folder = build_model(args.run, args.name, weights=args.weights or args.run / "checkpoints/latest.safetensors",
                             tests=tests, summary=args.summary, recipe=args.recipe,
                             training_problems=args.training_problems, version=args.version,
                             preset=args.preset)  # fmt: skip
    except SgpsError as error:
        print(f"make_model: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
