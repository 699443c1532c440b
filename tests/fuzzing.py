"""A fuzz harness for what users give sgps: cases by class, run in-process, outcomes judged.

Cases are generated from the code's own tables, so a new surface is covered when it is
added (or the harness fails until it is classified):

- ``output paths``: every path option of every command (read from the argument
  parser) that writes, given each hostile path: empty, ``.``, ``/``, a FIFO, a device,
  a folder where a file goes or a file where a folder goes, a path under a file, a
  dangling link, and the command's own input. A new path option that `OUTPUTS` and
  `INPUT_OPTIONS` do not classify fails `unclassified_path_options`.
- ``options per algorithm``: every `TRAIN_OPTIONS` option for every algorithm it does
  not apply to, every setting in a `--config` file for every algorithm that does not use
  it, and hostile values (negative, huge, non-ASCII digits, nan, empty, junk)
  for every valued training option.
- ``api arguments``: every argument of `sgps.train`, `sgps.load` and `Searcher.solve`
  given a value of the wrong type.
- ``damaged records``: run folders whose metrics, logs, locks and trainer state are
  damaged or replaced by FIFOs, resumed.
- ``folders sgps made``: every output option aimed at an archive (sealed), a comparison
  folder, a run folder, paths inside them and links to them; ``sgps report`` through a
  link onto the comparison's own file.
- ``nested documents``: archive indexes, configs, comparison plans and level headers
  nested 100,000 deep.
- ``damaged archives``: archives whose index, parts or members are damaged, unpacked;
  forks of damaged runs and forks into what they read.

Each case runs `sgps.cli.main` (or the API call) in this process under a deadline, with
training replaced by a sentinel once every check has passed (`Accepted`): a case either
is refused (exit status 2 and one ``sgps: error:`` line; from Python an `SgpsError`,
`TypeError` or `ValueError` naming the argument), is accepted, raises some other
exception (a traceback), or blocks (a hang). A case whose input is hostile must be
refused; a refused case must leave the workspace as it was.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from sgps.errors import SgpsError

REFUSED, ACCEPTED, TRACEBACK, HANG, UNCLEAR, LEFT_FILES, WRONG = (
    "refused", "accepted", "traceback", "hang", "unclear message", "left files behind", "wrong result")  # fmt: skip
#: Outcomes that are defects whatever the case expected.
DEFECTS = (TRACEBACK, HANG, UNCLEAR, LEFT_FILES, WRONG)
SILENT_ACCEPT = "silent accept"

#: Output options of the command line: (command, dest) -> kind ("file" or "folder"), and a
#: command line that is valid apart from the output (``{OUT}``; ``{levels}``, ``{run}``,
#: ``{config}`` and ``{fresh}`` name the workspace's files).
OUTPUTS: dict[tuple[str, str], tuple[str, str]] = {
    ("generate", "out"): ("file", "generate tsp --count 2 --out {OUT}"),
    ("show", "png"): ("file", "show {levels} --png {OUT}"),
    ("solve", "gif"): ("file", "solve {levels} --gif {OUT}"),
    ("dataset", "out"): ("file", "dataset tsp --problems {levels} --out {OUT} --workers 1"),
    ("train", "out"): ("folder", "train --problems {levels} --out {OUT} --preset tiny"),
    ("train", "tensorboard"): ("folder", "train --problems {levels} --out {fresh} --preset tiny --tensorboard {OUT}"),
    ("test", "gif"): ("folder", "test {run} --problems {levels} --gif {OUT}"),
    ("subgoals", "png"): ("file", "subgoals {run} --problems {levels} --png {OUT}"),
    ("compare", "out"): ("folder", "compare {config} --out {OUT}"),
    ("demo", "out"): ("folder", "demo --out {OUT} --no-train --count 1"),
    ("pack", "out"): ("folder", "pack {run} --problems {levels} --out {OUT}"),
    ("unpack", "out"): ("folder", "unpack {archive} --out {OUT}"),
    ("fork", "out"): ("folder", "fork {run} --problems {levels} --out {OUT} --initial-budget 400"),
}
#: File outputs that are pictures, whose names must end in their format's suffix.
PICTURES = ("show", "solve", "subgoals")
#: HIPS-ε writes its run folder through the same --out: the same hostile paths apply.
HIPS_OUTPUT = ("folder", "train --algorithm hips-eps --problems {levels} --out {OUT}")
#: The workspace folder where cases copy runs to damage them (not part of the disk-unchanged check).
SCRATCH = "scratch"
#: A finished run of the workspace on other levels with another seed: a trainer state that is not the run's.
OTHER_RUN = "other-run"
#: Path options that only read: (command, dest).
INPUT_OPTIONS = {
    ("show", "file"), ("solve", "file"), ("dataset", "problems"), ("train", "problems"), ("train", "dataset"),
    ("train", "extra_problems"), ("train", "validation"), ("train", "config"), ("test", "run"),
    ("test", "problems"), ("subgoals", "run"), ("subgoals", "problems"), ("compare", "config"), ("report", "dir"),
    ("demo", "config"), ("pack", "path"), ("pack", "problems"), ("pack", "validation"), ("unpack", "archive"),
    ("fork", "run"), ("fork", "problems"), ("fork", "validation"),
}  # fmt: skip
#: Options holding a path that the parser reads as text (a setting), with the outputs above.
TEXT_PATH_OPTIONS = {("train", "tensorboard")}


@dataclass(frozen=True)
class Workspace:
    """The files cases refer to: a level file, a finished run, a comparison config, and room to write."""

    root: Path
    levels: Path
    run: Path
    config: Path
    journal: Path  # the journal of a finished dataset build of `levels`
    dataset: Path  # that build's dataset
    archive: Path  # `run` packed (`sgps pack`)
    comparison: Path  # a folder marked as `sgps compare` marks its own (compare.toml, problems/)

    def fill(self, template: str, out: str) -> list[str]:
        names = {"{levels}": str(self.levels), "{run}": str(self.run), "{config}": str(self.config),
                 "{fresh}": str(self.root / "fresh-run"), "{archive}": str(self.archive),
                 "{comparison}": str(self.comparison)}  # fmt: skip
        words = []
        for word in template.split():
            words.append(out if word == "{OUT}" else names.get(word, word))
        return words


@dataclass
class Case:
    """One input: run `call` (which returns an exit status) and judge it against `hostile`."""

    kind: str  # the class of the case
    name: str
    call: Callable[[], int]
    hostile: bool = True  # must be refused
    names: Sequence[str] = ()  # for API cases: words the refusal must contain (the argument's name)
    outcome: str = ""
    message: str = field(default="", repr=False)

    @property
    def defect(self) -> str | None:
        """What is wrong with the outcome (None when nothing)."""
        if self.outcome in DEFECTS:
            return self.outcome
        if self.outcome == ACCEPTED and self.hostile:
            return SILENT_ACCEPT
        return None


class Accepted(Exception):  # noqa: N818 - a sentinel, not an error
    """Raised in place of training: every check of the command has passed."""


class WrongResultError(Exception):
    """Raised by a case that was accepted but wrote something other than the undamaged input gives."""


def unclassified_path_options() -> list[tuple[str, str]]:
    """Path options of the parser that neither `OUTPUTS` nor `INPUT_OPTIONS` classify."""
    from sgps.cli import _path, build_parser

    parser = build_parser()
    commands = next(action for action in parser._actions if action.dest == "command").choices
    found = {(name, action.dest) for name, sub in commands.items() for action in sub._actions
             if action.type is _path or (name, action.dest) in TEXT_PATH_OPTIONS}  # fmt: skip
    return sorted(found - set(OUTPUTS) - INPUT_OPTIONS)


def output_path_cases(space: Workspace) -> list[Case]:
    """Every output option given every hostile path (those that its kind refuses)."""
    root = space.root
    hostile = {
        "empty": "",
        "current folder": ".",
        "root": "/",
        "FIFO": str(root / "fifo"),
        "device": os.devnull,
        "under a file": str(space.levels / "x"),
        "dangling link": str(root / "dangling"),
        "folder": str(root / "a-folder"),
        "file": str(root / "a-file"),
    }
    file_only = {
        "a file of a run": str(space.run / "checkpoints" / "best.safetensors"),
        "a link to a file of a run": str(root / "run-link"),
    }
    cases = []
    for (command, dest), (kind, template) in [*OUTPUTS.items(), (("train/hips-eps", "out"), HIPS_OUTPUT)]:
        for label, value in {**hostile, **(file_only if kind == "file" else {})}.items():
            if (kind, label) in (("folder", "current folder"), ("folder", "folder"), ("file", "file")):
                continue  # what that kind of output may be
            argv = space.fill(template, value)
            cases.append(Case("output paths", f"{command} --{dest} <{label}>", _cli(argv)))
        if command in PICTURES:  # a picture named like a level file, among the levels
            argv = space.fill(template, str(root / "levels-folder" / "zz.txt"))
            cases.append(Case("output paths", f"{command} --{dest} <named like a level file>", _cli(argv)))
        if command not in ("generate", "demo"):  # the command's own input as its output
            own_input = space.run if command in ("test", "subgoals", "pack", "fork") else space.levels
            argv = space.fill(template, str(own_input))
            cases.append(Case("output paths", f"{command} --{dest} <its input>", _cli(argv)))
    return cases + test_record_cases(space)


def test_record_cases(space: Workspace) -> list[Case]:
    """`sgps test` writing its record onto its level file through a link, into a folder, or over the
    record of another level set that shares its file name."""
    from sgps.domains import get_domain, write_levels
    from sgps.runs.testing import TEST_COLUMNS

    def test_call(label: str, damage: Callable[[Path], Path]) -> Case:
        def call() -> int:
            from sgps.cli import main

            copy = space.root / SCRATCH / label.replace(" ", "-")
            copy.parent.mkdir(exist_ok=True)
            os.system(f"rm -rf '{copy}' && cp -r '{space.run}' '{copy}'")
            problems = damage(copy)
            return main(["test", str(copy), "--problems", str(problems), "--budget", "100"])

        return Case("output paths", f"test record <{label}>", call)

    def link_to_levels(run: Path) -> Path:
        levels = run.parent / "t.txt"
        levels.write_bytes(space.levels.read_bytes())
        (run / "metrics" / "test-t.csv").symlink_to(levels)
        return levels

    def folder(run: Path) -> Path:
        (run / "metrics" / "test-t.csv").mkdir()
        return space.levels

    def another_set(run: Path) -> Path:
        (run / "metrics" / "test-t.csv").write_text(f"{','.join(TEST_COLUMNS)}\n1,0,0,5,9,,100,0.1,9,,w,"
                                                     "0123456789abcdef\n")  # fmt: skip
        other = run.parent / "other" / "t.txt"
        other.parent.mkdir(exist_ok=True)
        domain = get_domain("tsp")
        write_levels(other, domain, [domain.generate(seed) for seed in range(50, 52)])
        return other

    return [test_call("a link to its level file", link_to_levels), test_call("a folder", folder),
            test_call("another level set with the same name", another_set)]  # fmt: skip


#: The suffix a new file of each file output gets (pictures must end in their format's).
_FILE_SUFFIX = {"generate": ".txt", "show": ".png", "solve": ".gif", "dataset": ".npz", "subgoals": ".png"}
#: Folder outputs that make a folder of the kind sgps protects (the others write pictures or logs into theirs).
_MAKES_A_FOLDER = {("train", "out"), ("train/hips-eps", "out"), ("compare", "out"), ("pack", "out"),
                   ("unpack", "out"), ("fork", "out")}


def made_folder_cases(space: Workspace) -> list[Case]:
    """Every output option aimed at the folders sgps made (`sgps.outputs.folder_kind`), links followed.

    An archive is sealed; a comparison's and a run's files are their own; a run, a comparison or an
    archive is made only where nothing of another kind holds it (a run may lie in a comparison's
    ``runs/``). Writing a picture or a log into a new folder inside a run is not hostile.
    """
    root, archive, comparison, run = space.root, space.archive, space.comparison, space.run
    link = root / "archive-link"
    cases = []
    for (command, dest), (kind, template) in [*OUTPUTS.items(), (("train/hips-eps", "out"), HIPS_OUTPUT)]:
        if kind == "file":
            new = f"new{_FILE_SUFFIX[command]}"
            targets = {"a file of the archive": archive / "archive.json", "a new file in the archive": archive / new,
                       "a new file through a link to the archive": link / new,
                       "a file of a comparison": comparison / "compare.toml",
                       "a comparison's problems": comparison / "problems" / "train.txt",
                       "a link to a file of a comparison": root / "comparison-link"}  # fmt: skip
            hostile = dict.fromkeys(targets, True)
        else:
            makes = (command, dest) in _MAKES_A_FOLDER
            targets = {"the archive": archive, "a link to the archive": link,
                       "a folder in the archive": archive / "new",
                       "a folder through a link to the archive": link / "new", "a comparison": comparison,
                       "a comparison's problems": comparison / "problems", "a run": run,
                       "a folder in a run": run / "new"}  # fmt: skip
            hostile = dict.fromkeys(targets, True)
            hostile["a folder in a run"] = makes  # GIFs, logs or a demo's levels beside the run's own files
            if command == "compare":
                hostile["a comparison"] = False  # its own kind: the same comparison, resumed or refused as changed
            if not makes:
                hostile["a comparison's problems"] = False  # GIFs or logs in a new folder beside the levels
        for label, target in targets.items():
            argv = space.fill(template, str(target))
            cases.append(Case("folders sgps made", f"{command} --{dest} <{label}>", _cli(argv), hostile[label]))
    cases.append(Case("folders sgps made", "report <curves.png a link to compare.toml>", _report_through_a_link(space)))
    return cases


def _report_through_a_link(space: Workspace) -> Callable[[], int]:
    """`sgps report` on a comparison whose curves.png links to its compare.toml (once overwritten with a PNG)."""

    def call() -> int:
        from sgps.cli import main

        copy = space.root / SCRATCH / "comparison-with-a-link"
        copy.parent.mkdir(exist_ok=True)
        os.system(f"rm -rf '{copy}' && cp -r '{space.comparison}' '{copy}'")
        (copy / "curves.png").symlink_to("compare.toml")
        plan = (copy / "compare.toml").read_bytes()
        status = main(["report", str(copy)])
        if (copy / "compare.toml").read_bytes() != plan:
            raise WrongResultError("compare.toml was written through the link")
        return status

    return call


def nested_document_cases(space: Workspace) -> list[Case]:
    """Documents nested far deeper than any sgps writes, where each is read: one line, no RecursionError."""
    deep = 100_000
    scratch = space.root / SCRATCH / "nested"

    def case(label: str, name: str, text: str, argv: Callable[[Path], list[str]]) -> Case:
        def call() -> int:
            from sgps.cli import main

            os.system(f"rm -rf '{scratch}'")
            scratch.mkdir(parents=True)
            path = scratch / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return main(argv(path))

        return Case("nested documents", label, call)

    arrays, tables = "[" * deep + "]" * deep, "a" + "={b" * deep + "}" * deep
    levels, run = str(space.levels), str(space.run)
    train = ["train", "--problems", levels, "--out", str(scratch / "out"), "--preset", "tiny", "--config"]
    header = space.levels.read_text().splitlines()[0]
    return [
        case("archive index of arrays", "a/archive.json", arrays, lambda p: ["unpack", str(p.parent), "--out",
                                                                             str(scratch / "out")]),
        case("archive index of objects", "a/archive.json", '{"a":' * deep + "1" + "}" * deep,
             lambda p: ["unpack", str(p.parent), "--out", str(scratch / "out")]),
        case("config of arrays", "c.toml", f"x = {arrays}\n", lambda p: [*train, str(p)]),
        case("config of inline tables", "c.toml", tables + "\n", lambda p: [*train, str(p)]),
        case("comparison plan", "cmp/compare.toml", f"x = {arrays}\n", lambda p: ["compare", str(p), "--out",
                                                                                   str(scratch / "out")]),
        case("level header", "t.txt", header.split("{")[0] + '{"a":' * deep + "1" + "}" * deep + "\n",
             lambda p: ["test", run, "--problems", str(p)]),
    ]  # fmt: skip


def damaged_archive_cases(space: Workspace) -> list[Case]:
    """The run's archive with its index, parts or members damaged, unpacked; forks of damaged or linked runs."""
    import json

    scratch = space.root / SCRATCH

    def unpack_case(label: str, damage: Callable[[Path], None]) -> Case:
        def call() -> int:
            from sgps.cli import main

            copy, out = scratch / "damaged-archive", scratch / "unpacked"
            scratch.mkdir(exist_ok=True)
            os.system(f"rm -rf '{copy}' '{out}' && cp -r '{space.archive}' '{copy}'")
            damage(copy)
            status = main(["unpack", str(copy), "--out", str(out)])
            if status != 0 and out.exists():
                raise WrongResultError(f"a refused unpack left {out}")
            return status

        return Case("damaged archives", f"unpack <{label}>", call)

    def index(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
        def damage(copy: Path) -> None:
            document = json.loads((copy / "archive.json").read_text())
            change(document)
            (copy / "archive.json").write_text(json.dumps(document))

        return damage

    def member(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda document: document["members"][0].__setitem__(key, value)

    def part(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
        def damage(copy: Path) -> None:
            first = sorted(copy.glob("part-*"))[0]
            first.write_bytes(change(first.read_bytes()))

        return damage

    def drop_part(copy: Path) -> None:
        sorted(copy.glob("part-*"))[0].unlink()

    cases = [
        unpack_case("index is junk", lambda copy: (copy / "archive.json").write_bytes(b"\xff{junk")),
        unpack_case("index is empty", lambda copy: (copy / "archive.json").write_text("")),
        unpack_case("index is a FIFO", lambda copy: _damage(copy / "archive.json", "fifo")),
        unpack_case("a part is missing", drop_part),
        unpack_case("a part is cut short", part(lambda data: data[: len(data) // 2])),
        unpack_case("a part's bytes flipped", part(lambda data: data[:100] + bytes(b ^ 0xFF for b in data[100:200])
                                                   + data[200:])),
        unpack_case("a member's checksum changed", index(member("sha256", "0" * 64))),
        unpack_case("a member's size raised", index(member("bytes", 10**12))),
        unpack_case("a member outside the folder", index(member("path", "../escaped"))),
        unpack_case("a member at an absolute path", index(member("path", str(Path(tempfile.gettempdir()) / "out")))),
        unpack_case("a member path twice", index(lambda d: d["members"].append(dict(d["members"][0])))),
        unpack_case("another format", index(lambda d: d.__setitem__("format", "zip"))),
        unpack_case("a format version from the future", index(lambda d: d.__setitem__("version", 99))),
        unpack_case("an unknown kind", index(lambda d: d.__setitem__("kind", "model"))),
        unpack_case("the kind of a comparison", index(lambda d: d.__setitem__("kind", "comparison"))),
    ]  # fmt: skip
    cases += [fork_case(space, label, damage) for label, damage in _FORK_DAMAGES.items()]
    return cases


def fork_case(space: Workspace, label: str, damage: Callable[[Path, Path], list[str]]) -> Case:
    """`sgps fork` of a copy of the run damaged by `damage(copy, scratch)`, which returns the fork's options."""

    def call() -> int:
        from sgps.cli import main

        scratch = space.root / SCRATCH / "fork"
        copy, out = scratch / "parent", scratch / "child"
        os.system(f"rm -rf '{scratch}'")
        scratch.mkdir(parents=True)
        os.system(f"cp -r '{space.run}' '{copy}'")
        options = damage(copy, scratch)
        status = main(["fork", str(copy), "--problems", str(space.levels), *options])
        if status != 0 and (out.exists() or (copy / "child").exists()):
            raise WrongResultError("a refused fork left its folder")
        return status

    return Case("damaged archives", f"fork <{label}>", call)


def _edited_network(copy: Path, scratch: Path) -> list[str]:
    config = copy / "config.toml"
    config.write_text(config.read_text().replace("channels = ", "channels = 1", 1))
    return ["--out", str(scratch / "child")]


def _another_runs_state(copy: Path, scratch: Path) -> list[str]:
    other = copy.parent.parent.parent / OTHER_RUN  # the workspace's (trained there: here training is a sentinel)
    (copy / "checkpoints" / "trainer.pt").write_bytes((other / "checkpoints" / "trainer.pt").read_bytes())
    return ["--out", str(scratch / "child")]


def _into_itself_through_a_link(copy: Path, scratch: Path) -> list[str]:
    (scratch / "link").symlink_to(copy)
    return ["--out", str(scratch / "link" / "child")]


#: Damaged parents of a fork, and forks into what they read.
_FORK_DAMAGES: dict[str, Callable[[Path, Path], list[str]]] = {
    "config no longer matches the checkpoint": _edited_network,
    "trainer state of another run": _another_runs_state,
    "into the parent through a link": _into_itself_through_a_link,
}


#: Hostile values of valued training options, by the parser's type of the option.
HOSTILE_VALUES = {
    "int": ["-1", "99999999999999999999999", "1.5", "٣", "", "x"],
    "float": ["-1", "nan", "", "x", "1e999"],
    "choice": ["bogus", ""],
    "text": ["", "   "],
}


def option_cases(space: Workspace) -> list[Case]:
    """Options for algorithms they do not apply to, and hostile values of every valued training option."""
    from sgps.cli import _float, _int, build_parser
    from sgps.training.config import TRAIN_OPTIONS, option_flag
    from sgps.training.schema import ALGORITHMS

    base = space.fill("train --problems {levels} --out {fresh} --preset tiny", "")
    cases = []
    values = {"int": "1", "float": "1", "choice": None, "text": str(space.root / "tb")}
    train = next(action for action in build_parser()._actions if action.dest == "command").choices["train"]
    actions = {action.dest: action for action in train._actions}
    for name, option in TRAIN_OPTIONS.items():
        action = actions[name]
        typed = ("int" if action.type is _int else "float" if action.type is _float
                 else "choice" if action.choices else "text")  # fmt: skip
        value = [] if action.nargs == 0 else [values[typed] or action.choices[0]]
        for algorithm in (*ALGORITHMS, "hips-eps"):
            if algorithm not in option.algorithms and name != "algorithm":
                argv = [*base, "--algorithm", algorithm, option_flag(name), *value]
                cases.append(Case("options per algorithm", f"{option_flag(name)} with {algorithm}", _cli(argv)))
        if action.nargs != 0 and name != "algorithm":
            for bad in HOSTILE_VALUES[typed]:
                argv = [*base, "--algorithm", option.algorithms[-1], option_flag(name), bad]
                cases.append(Case("options per algorithm", f"{option_flag(name)} {bad!r}", _cli(argv)))
    test = space.fill("test {run} --problems {levels}", "")
    for bad in [*HOSTILE_VALUES["int"], "0", "100000"]:
        cases.append(Case("options per algorithm", f"test --workers {bad!r}", _cli([*test, "--workers", bad])))
    for bad in [*HOSTILE_VALUES["int"], "0", "4097"]:
        cases.append(Case("options per algorithm", f"test --evaluation-batch {bad!r}",
                          _cli([*test, "--evaluation-batch", bad])))  # fmt: skip
    cases.append(Case("options per algorithm", "test --workers 2 --executor ray",
                      _cli([*test, "--workers", "2", "--executor", "ray"])))  # fmt: skip
    for command in (base, space.fill("compare {config} --out {fresh}", "")):
        for bad in [*HOSTILE_VALUES["float"], "0"]:
            cases.append(Case("options per algorithm", f"{command[0]} --session-minutes {bad!r}",
                              _cli([*command, "--session-minutes", bad])))  # fmt: skip
    fork = [*space.fill("fork {run} --problems {levels} --out", ""), str(space.root / "fork")]
    for flag, typed in (("--initial-budget", "int"), ("--max-budget", "int"), ("--checkpoint-every", "int"),
                        ("--solution-memory", "int"), ("--max-expansions", "int"), ("--max-iterations", "int"),
                        ("--time-limit", "float"), ("--schedule", "choice")):  # fmt: skip
        for bad in HOSTILE_VALUES[typed]:
            cases.append(Case("options per algorithm", f"fork {flag} {bad!r}", _cli([*fork, flag, bad])))
    return cases + settings_file_cases(space, base)


def settings_file_cases(space: Workspace, base: list[str]) -> list[Case]:
    """Every setting written in a `--config` file for each Bootstrap algorithm that does not use it."""
    import dataclasses

    from sgps.runs.rundir import to_toml
    from sgps.training.config import SECTIONS, key_algorithms
    from sgps.training.schema import ALGORITHMS

    folder = space.root / SCRATCH / "settings"
    cases = []
    for section, cls in SECTIONS.items():
        for setting in dataclasses.fields(cls()):
            for algorithm in ALGORITHMS:
                if algorithm in key_algorithms(section, setting.name):
                    continue
                file = folder / f"{section}.{setting.name}-{algorithm}.toml"
                text = to_toml({section: {setting.name: getattr(cls(), setting.name)}})

                def call(file: Path = file, text: str = text, algorithm: str = algorithm) -> int:
                    from sgps.cli import main

                    file.parent.mkdir(parents=True, exist_ok=True)
                    file.write_text(text)
                    return main([*base, "--algorithm", algorithm, "--config", str(file)])

                cases.append(Case("options per algorithm", f"[{section}] {setting.name} in --config with {algorithm}",
                                  call))  # fmt: skip
    return cases


def api_cases(space: Workspace) -> list[Case]:
    """Arguments of the Python API given values of the wrong type or out of range."""
    import sgps

    train_args: dict[str, Any] = {
        "problems": 5, "out": 5, "domain": 5, "algorithm": 5, "validation": 5, "config": 5, "preset": 5,
        "seed": "3", "device": "gpu", "workers": "2", "evaluator": 5, "evaluation_batch": 1.5, "precision": 5,
        "learning_precision": 16,
        "max_iterations": "2", "time_limit": "1", "max_expansions": "1000", "failed_trees": "no",
        "codebook_size": 2.5, "cluster_level": "1",
        "conditioning": 5, "codebook": 5, "mixture": 5, "levin_plus_one": "yes", "duplicates": 5, "loss": 5,
        "tensorboard": 5, "threads": "2", "max_batches": 0, "recipe": 5, "session_minutes": "5",
    }  # fmt: skip
    cases = []
    for name, value in train_args.items():
        arguments: dict[str, Any] = {"problems": space.levels, "out": space.root / "api-run", "preset": "tiny"}
        arguments[name] = value

        def call(arguments: dict[str, Any] = arguments) -> int:
            sgps.train(**arguments)
            return 0

        cases.append(Case("api arguments", f"sgps.train({name}={value!r})", call, names=(name,)))
    for name, value in {"path": 5, "checkpoint": 5, "device": "gpu"}.items():
        arguments = {"path": space.run, name: value}

        def load(arguments: dict[str, Any] = arguments) -> int:
            sgps.load(**arguments)
            return 0

        cases.append(Case("api arguments", f"sgps.load({name}={value!r})", load, names=(name,)))
    searcher = sgps.load(space.run)
    for name, value in {"level": 5, "index": "0", "budget": -1, "epsilon": 2.0, "algorithm": 5}.items():
        arguments = {"level": space.levels, name: value}

        def solve(arguments: dict[str, Any] = arguments) -> int:
            searcher.solve(**arguments)
            return 0

        cases.append(Case("api arguments", f"Searcher.solve({name}={value!r})", solve, names=(name,)))

    def level_with_index() -> int:
        from sgps.domains import read_levels

        searcher.solve(read_levels(space.levels).levels[0], 1)
        return 0

    cases.append(Case("api arguments", "Searcher.solve(Level, index=1)", level_with_index, names=("index",)))
    environment_args: dict[str, Any] = {"domain": 5, "level_file": 5, "level_index": "0", "max_steps": -1,
                                        "reward": 5, "render_mode": "hologram", "params": 5}  # fmt: skip
    for name, value in environment_args.items():
        arguments = {"domain": "tsp", "level_seed": 0, name: value}

        def environment(arguments: dict[str, Any] = arguments) -> int:
            from sgps.gym import SgpsEnv

            SgpsEnv(**arguments)
            return 0

        cases.append(Case("api arguments", f"SgpsEnv({name}={value!r})", environment, names=(name,)))
    return cases


def damaged_dataset_cases(space: Workspace) -> list[Case]:
    """Every array of a dataset file given another shape, kind or values, then trained on (HIPS-ε)."""
    import numpy as np

    with np.load(space.dataset) as archive:
        arrays = {name: archive[name] for name in archive.files}
    damages: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "2-D": lambda array: np.stack([array, array]) if array.ndim else np.array([[array]]),
        "float": lambda array: array.astype(float) if array.dtype.kind in "iu" else np.array([1.5]),
        "empty": lambda array: array[:0] if array.ndim else np.array([]),
        "negated": lambda array: -array.astype(np.int64) if array.dtype.kind in "iu" else np.array(["?"]),
        "text": lambda array: np.array(["x"] * max(array.size, 1)),
    }
    cases = []
    for name in arrays:
        for label, damage in damages.items():
            def call(name: str = name, damage: Callable[[np.ndarray], np.ndarray] = damage, label: str = label) -> int:
                from sgps.cli import main

                folder = space.root / SCRATCH / "datasets"
                folder.mkdir(parents=True, exist_ok=True)
                file = folder / f"{name}-{label}.npz"
                np.savez(file, **{**arrays, name: damage(arrays[name])})
                return main(["train", "--algorithm", "hips-eps", "--dataset", str(file), "--out",
                             str(folder / f"{name}-{label}-run"), "--preset", "tiny"])  # fmt: skip

            renamed = (name, label) == ("names", "text")  # other labels for the same trajectories: harmless
            cases.append(Case("damaged datasets", f"{name} {label}", call, hostile=not renamed))
    return cases


def damaged_run_cases(space: Workspace) -> list[Case]:
    """A finished run's own files damaged or replaced by FIFOs, then resumed with a raised limit."""
    cases = []
    damages = {
        "lock is a FIFO": (".lock", "fifo"), "log is a FIFO": ("log.txt", "fifo"),
        "metrics are a FIFO": ("metrics/train.csv", "fifo"),
        "trainer state is a FIFO": ("checkpoints/trainer.pt", "fifo"),
        "trainer state is random bytes": ("checkpoints/trainer.pt", "random"),
        "metrics lost a row": ("metrics/train.csv", "cut"), "metrics are not UTF-8": ("metrics/train.csv", "binary"),
        "config is a folder": ("config.toml", "folder"), "config is empty": ("config.toml", "empty"),
        "solution memory names no problem": ("checkpoints/trainer.pt", "memory-problem"),
        "solution memory holds junk": ("checkpoints/trainer.pt", "memory-junk"),
        "solution memory misses its goal": ("checkpoints/trainer.pt", "memory-goal"),
    }  # fmt: skip
    for label, (name, damage) in damages.items():
        def call(name: str = name, damage: str = damage, label: str = label) -> int:
            from sgps.cli import main

            copy = space.root / SCRATCH / label.replace(" ", "-")
            copy.parent.mkdir(exist_ok=True)
            os.system(f"rm -rf '{copy}' && cp -r '{space.run}' '{copy}'")
            _damage(copy / name, damage)
            return main(["train", "--problems", str(space.levels), "--out", str(copy), "--resume", "--quiet",
                         "--max-iterations", "5"])  # fmt: skip

        cases.append(Case("damaged records", label, call))
    return cases


def damaged_journal_cases(space: Workspace) -> list[Case]:
    """A dataset journal (`sgps dataset`'s record of finished levels) damaged field by field, then resumed.

    Every entry's every field is removed or given a value of another type or range,
    entries are duplicated, swapped and cut, and the file is made binary or a FIFO. The
    command may refuse or rebuild; if it writes a dataset, it must be the dataset an
    undamaged build writes, trajectory for trajectory.
    """
    import json

    from sgps.training.methods.hips.dataset import read_dataset

    template = space.journal.read_text().splitlines()
    header, entries = template[0], [json.loads(line) for line in template[1:]]
    clean = read_dataset(space.dataset)
    mutations: list[tuple[str, Callable[[], bytes]]] = []
    for number, entry in enumerate(entries):
        for key in entry:
            for value in (None, -1, "x", [], True, 10**30):
                mutations.append((f"entry {number} {key}={value!r}", _entries(header, entries, number, key, value)))
            mutations.append((f"entry {number} without {key}", _entries(header, entries, number, key, _REMOVE)))
    text = "\n".join(template) + "\n"
    mutations += [
        ("an entry twice", lambda: ("\n".join([*template, template[1]]) + "\n").encode()),
        ("entries swapped", lambda: ("\n".join([header, *template[1:][::-1]]) + "\n").encode()),
        ("cut mid-entry", lambda: text[: len(text) * 2 // 3].encode()),
        ("header of another build", lambda: ("\n".join([header.replace('"count":', '"count":1'), *template[1:]])
                                              + "\n").encode()),
        ("not UTF-8", lambda: b"\xff\xfe" + text.encode()),
        ("empty", lambda: b""),
    ]
    cases = []
    for label, content in mutations:
        def call(label: str = label, content: Callable[[], bytes] = content) -> int:
            from sgps.cli import main

            folder = space.root / SCRATCH / "journals"
            folder.mkdir(parents=True, exist_ok=True)
            out = folder / f"{abs(hash(label))}.npz"
            out.unlink(missing_ok=True)
            (folder / f"{out.name}.journal").write_bytes(content())
            status = main(["dataset", "tsp", "--problems", str(space.levels), "--out", str(out), "--workers", "1"])
            if status == 0:
                written = read_dataset(out)
                if [(t.name, t.actions) for t in written.trajectories] != \
                        [(t.name, t.actions) for t in clean.trajectories]:  # fmt: skip
                    raise WrongResultError("the dataset differs from an undamaged build's")
            return status

        cases.append(Case("damaged journals", label, call, hostile=False))

    def fifo() -> int:
        from sgps.cli import main

        folder = space.root / SCRATCH / "journals"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "fifo.npz.journal").unlink(missing_ok=True)
        os.mkfifo(folder / "fifo.npz.journal")
        return main(["dataset", "tsp", "--problems", str(space.levels), "--out", str(folder / "fifo.npz")])

    cases.append(Case("damaged journals", "journal is a FIFO", fifo))
    cases += test_journal_cases(space)
    for label, name in (("test record is a FIFO", "test-t.csv"), ("test journal is a FIFO", "test-t.csv.partial")):
        def test_call(name: str = name, label: str = label) -> int:
            from sgps.cli import main

            copy = space.root / SCRATCH / label.replace(" ", "-")
            copy.parent.mkdir(exist_ok=True)
            os.system(f"rm -rf '{copy}' && cp -r '{space.run}' '{copy}'")
            _damage(copy / "metrics" / name, "fifo")
            return main(["test", str(copy), "--problems", str(space.levels), "--budget", "100"])

        cases.append(Case("damaged journals", label, test_call))
    return cases


def test_journal_cases(space: Workspace) -> list[Case]:
    """A whole test journal (`sgps test`'s record of finished attempts) damaged field by field, then resumed.

    Each field of its first row (the checksum included) is emptied or given junk or a huge
    number; rows are duplicated, swapped and cut; the identity line is another test's. The
    test may refuse or resume; the record it writes must be an undamaged test's, row for row
    (the seconds aside).
    """
    import csv
    from unittest import mock

    from sgps.cli import main
    from sgps.runs.testing import AttemptJournal

    template = space.root / SCRATCH / "test-journal-template"
    argv = ["--problems", str(space.levels), "--budget", "100"]
    record, journal = Path("metrics") / "test-t.csv", Path("metrics") / "test-t.csv.partial"
    if not template.exists():  # a test whose journal is kept when it ends: every attempt journalled
        template.parent.mkdir(parents=True, exist_ok=True)
        os.system(f"cp -r '{space.run}' '{template}'")
        with mock.patch.object(AttemptJournal, "remove", lambda self: None), _quiet():
            assert main(["test", str(template), *argv]) == 0

    def rows(path: Path) -> list[dict[str, str]]:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(path.open())]

    lines = (template / journal).read_text().splitlines()
    identity, header, body = lines[0], lines[1], lines[2:]
    mutations: list[tuple[str, list[str]]] = []
    first = body[0].split(",")
    for column, name in enumerate(header.split(",")):
        for value in ("", "x", "9" * 30):
            changed = [*first[:column], value, *first[column + 1 :]]
            mutations.append((f"test journal row 0 {name}={value[:6]!r}", [identity, header, ",".join(changed),
                                                                           *body[1:]]))  # fmt: skip
    text = "\n".join(lines)
    mutations += [
        ("test journal row twice", [*lines, body[0]]),
        ("test journal rows swapped", [identity, header, *body[::-1]]),
        ("test journal cut mid-row", text[: len(text) * 2 // 3].split("\n")),
        ("test journal of another test", ["# " + "0" * 64, header, *body]),
    ]
    cases = []
    for label, content in mutations:
        def call(label: str = label, content: list[str] = content) -> int:
            copy = space.root / SCRATCH / label.replace(" ", "-").replace("'", "")
            os.system(f"rm -rf '{copy}' && cp -r '{template}' '{copy}'")
            (copy / record).unlink()
            (copy / journal).write_text("\n".join(content) + "\n")
            status = main(["test", str(copy), *argv])
            if status == 0 and rows(copy / record) != rows(template / record):
                raise WrongResultError("the record differs from an undamaged test's")
            return status

        cases.append(Case("damaged journals", label, call, hostile=False))
    return cases


_REMOVE = object()


def _entries(header: str, entries: list[dict[str, Any]], number: int, key: str, value: Any) -> Callable[[], bytes]:
    """The journal text with entry `number`'s `key` set to `value` (removed for `_REMOVE`)."""
    import json

    def content() -> bytes:
        changed = [dict(entry) for entry in entries]
        if value is _REMOVE:
            del changed[number][key]
        else:
            changed[number][key] = value
        return ("\n".join([header, *(json.dumps(entry) for entry in changed)]) + "\n").encode()

    return content


#: Solution memories written into a trainer state: an index past the problems, entries of the wrong
#: shape, and a solution that replays but does not reach its goal (refused when the update recalls it).
DAMAGED_MEMORIES = {"memory-problem": [[10**6, [0], 5, None]], "memory-junk": [["x", "y"], 3],
                    "memory-goal": [[0, [], 5, None]]}  # fmt: skip


def _damage(path: Path, how: str) -> None:
    if how in DAMAGED_MEMORIES:
        from sgps.runs.trainer_state import encode_trainer_state, read_trainer_state

        state = read_trainer_state(path)
        state["loop"]["remembered"] = DAMAGED_MEMORIES[how]
        path.write_bytes(encode_trainer_state(state))
        return
    if how == "cut":
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:-1]))
        return
    if path.is_dir():
        os.system(f"rm -rf '{path}'")
    else:
        path.unlink(missing_ok=True)
    if how == "fifo":
        os.mkfifo(path)
    elif how == "random":
        path.write_bytes(os.urandom(2048))
    elif how == "binary":
        path.write_bytes(b"\xff\xfe\x00bad")
    elif how == "folder":
        path.mkdir()
    else:
        path.write_text("")


def make_workspace(root: Path) -> Workspace:
    """A level file, a finished tiny run, a comparison config and the special files the cases aim at."""
    from sgps.cli import main
    from sgps.domains import get_domain, read_levels, write_levels
    from sgps.training.methods.hips.dataset import build_dataset, write_dataset

    root.mkdir(parents=True, exist_ok=True)
    domain = get_domain("tsp")
    levels = root / "t.txt"
    write_levels(levels, domain, [domain.generate(seed) for seed in range(10)])
    run = root / "run"
    with _quiet():
        assert main(["train", "--problems", str(levels), "--out", str(run), "--preset", "tiny", "--quiet",
                     "--device", "cpu", "--max-iterations", "1", "--workers", "1"]) == 0  # fmt: skip
    other_levels = root / "other.txt"
    write_levels(other_levels, domain, [domain.generate(seed) for seed in range(100, 103)])
    with _quiet():
        assert main(["train", "--problems", str(other_levels), "--out", str(root / OTHER_RUN), "--preset", "tiny",
                     "--quiet", "--device", "cpu", "--max-iterations", "1", "--workers", "1", "--seed", "9"]) == 0
    archive = root / "archive"
    with _quiet():
        assert main(["pack", str(run), "--problems", str(levels), "--out", str(archive)]) == 0
    config = root / "compare.toml"
    config.write_text("[problems]\n")
    journal, dataset = root / "journal-template", root / "dataset.npz"
    built = build_dataset(domain, read_levels(levels).levels, journal=journal)
    write_dataset(dataset, built.dataset)
    os.mkfifo(root / "fifo")
    (root / "dangling").symlink_to(root / "nowhere")
    (root / "a-folder").mkdir()
    (root / "a-file").write_text("x")
    (root / "run-link").symlink_to(run / "config.toml")
    (root / "levels-folder").mkdir()
    (root / "levels-folder" / "a.txt").write_bytes(levels.read_bytes())
    comparison = root / "comparison"
    (comparison / "problems").mkdir(parents=True)
    (comparison / "compare.toml").write_text(config.read_text())
    (comparison / "problems" / "train.txt").write_bytes(levels.read_bytes())
    (root / "archive-link").symlink_to(archive)
    (root / "comparison-link").symlink_to(comparison / "compare.toml")
    return Workspace(root, levels, run, config, journal, dataset, archive, comparison)


def run_cases(cases: Sequence[Case], root: Path, *, limit: int = 30) -> None:
    """Run each case, setting its `outcome` and `message`."""
    for case in cases:
        before = _snapshot(root)
        out, err = io.StringIO(), io.StringIO()
        try:
            with deadline(limit), _sentinels(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = case.call()
        except Accepted:
            status = 0
        except WrongResultError as error:
            case.outcome, case.message = WRONG, str(error)
            continue
        except SystemExit as exited:  # argparse's refusals
            status = exited.code if isinstance(exited.code, int) else 2
        except TimeoutError:
            case.outcome, case.message = HANG, f"blocked for {limit} s"
            continue
        except (SgpsError, TypeError, ValueError) as error:
            status, err = 2, io.StringIO(f"sgps: error: {error}\n")
            if case.names and not any(name in str(error) or name.replace("_", "-") in str(error)
                                      for name in case.names):  # fmt: skip
                case.outcome, case.message = UNCLEAR, f"{type(error).__name__}: {error}"
                continue
        except BaseException as error:
            case.outcome, case.message = TRACEBACK, f"{type(error).__name__}: {error}"
            continue
        case.message = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else ""
        if status == 0:
            case.outcome = ACCEPTED
        elif "Traceback" in err.getvalue():
            case.outcome = TRACEBACK
        elif status != 2 or len([line for line in err.getvalue().splitlines() if ": error: " in line]) != 1:
            case.outcome = UNCLEAR
        elif _snapshot(root) != before:
            case.outcome = LEFT_FILES
        else:
            case.outcome = REFUSED


def summary(cases: Sequence[Case]) -> list[tuple[str, int, dict[str, int], int]]:
    """Per class: (class, cases, outcome counts, defects)."""
    rows = []
    for kind in dict.fromkeys(case.kind for case in cases):
        mine = [case for case in cases if case.kind == kind]
        counts: dict[str, int] = {}
        for case in mine:
            counts[case.outcome] = counts.get(case.outcome, 0) + 1
        rows.append((kind, len(mine), counts, sum(case.defect is not None for case in mine)))
    return rows


def _cli(argv: list[str]) -> Callable[[], int]:
    def call() -> int:
        from sgps.cli import main

        return main(argv)

    return call


@contextlib.contextmanager
def _sentinels() -> Iterator[None]:
    """Training and HIPS-ε learning replaced by `Accepted`: a case that gets there passed every check."""

    def accepted(*_: Any, **__: Any) -> Any:
        raise Accepted

    with mock.patch("sgps.runs.runner._run_with_progress", accepted), \
            mock.patch("sgps.training.methods.hips.run.HipsLearner.train", accepted):  # fmt: skip
        yield


@contextlib.contextmanager
def deadline(seconds: int = 20) -> Iterator[None]:
    """Turn a hang (a blocking open of a FIFO) into a `TimeoutError` after `seconds`."""

    def expire(*_: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def _snapshot(root: Path) -> dict[str, int | None]:
    """Every path under `root` with its size and modification time (None for special files)."""
    state = {}
    for path in sorted(root.rglob("*")):
        if SCRATCH in path.relative_to(root).parts:
            continue
        info = path.lstat()
        regular = path.is_file() and not path.is_fifo()
        state[str(path)] = hash((info.st_size, info.st_mtime_ns)) if regular else None
    return state
