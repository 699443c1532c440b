"""Run the fuzz harness (tests/fuzzing.py) over its whole corpus and print outcomes per class.

The test suite runs the harness's fixed cases (tests/test_fuzz.py); this adds random
values for every valued training option and every API argument (`--random N` per
option, seeded), and prints one row per class: cases, refused, accepted, and the
defects (tracebacks, hangs, silent accepts, unclear messages, files left behind), then
each defect. Exit status 1 when there is any.

    python benchmarks/fuzz.py [--random 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fuzzing

#: Characters random option values are drawn from: digits of several scripts, signs, exponents, junk.
ALPHABET = "0123456789-+.eE_ xnaif٣３\x00/é"


def random_option_cases(space: fuzzing.Workspace, count: int, rng: random.Random) -> list[fuzzing.Case]:
    """`count` random strings for every valued training option: any outcome but a defect is fine."""
    from sgps.cli import build_parser
    from sgps.training.config import TRAIN_OPTIONS, option_flag

    train = next(action for action in build_parser()._actions if action.dest == "command").choices["train"]
    valued = [name for name in TRAIN_OPTIONS if {a.dest: a for a in train._actions}[name].nargs != 0]
    base = space.fill("train --problems {levels} --out {fresh} --preset tiny", "")
    cases = []
    for name in valued:
        for _ in range(count):
            value = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))
            argv = [*base, f"{option_flag(name)}={value}"]
            cases.append(fuzzing.Case("random option values", f"{option_flag(name)}={value!r}", fuzzing._cli(argv),
                                      hostile=False))  # fmt: skip
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=20, help="random values per training option (default: 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random values (default: 0)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sgps-fuzz-") as folder:
        space = fuzzing.make_workspace(Path(folder) / "space")
        cases = [*fuzzing.output_path_cases(space), *fuzzing.option_cases(space), *fuzzing.api_cases(space),
                 *fuzzing.damaged_run_cases(space), *fuzzing.damaged_journal_cases(space),
                 *fuzzing.damaged_dataset_cases(space), *fuzzing.made_folder_cases(space),
                 *fuzzing.nested_document_cases(space), *fuzzing.damaged_archive_cases(space),
                 *random_option_cases(space, args.random, random.Random(args.seed))]  # fmt: skip
        fuzzing.run_cases(cases, space.root)
    print(f"{'class':24s} {'cases':>6s} {'refused':>8s} {'accepted':>9s} {'defects':>8s}")
    for kind, total, counts, defects in fuzzing.summary(cases):
        print(f"{kind:24s} {total:6d} {counts.get(fuzzing.REFUSED, 0):8d} {counts.get(fuzzing.ACCEPTED, 0):9d} "
              f"{defects:8d}")  # fmt: skip
    defects = [case for case in cases if case.defect]
    kinds = {kind: sum(case.defect == kind for case in defects)
             for kind in (*fuzzing.DEFECTS, fuzzing.SILENT_ACCEPT)}  # fmt: skip
    print(f"all: {len(cases)} cases; " + ", ".join(f"{kind}: {number}" for kind, number in kinds.items()))
    for case in defects:
        print(f"DEFECT {case.kind} / {case.name}: {case.defect} ({case.message})")
    for case in cases:
        if case.outcome == fuzzing.ACCEPTED:
            print(f"accepted (not hostile): {case.kind} / {case.name}")
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
