"""A comparison folder as an archive (`sgps pack DIR`, `sgps unpack`): long comparisons move between machines.

Every run of the comparison is read as a consistent snapshot (`sgps.runs.packing`), so
a comparison can be packed while it trains. Problem sets the comparison generated are left
out: unpacking generates them again from ``compare.toml`` and checks them against the
digests the comparison recorded when it first wrote them (``problems/digests.json``), so
the runs go on with exactly the levels they started on. Sets cut from the user's level
files are kept. Unpacked elsewhere, the comparison goes on with::

    sgps compare DIR/compare.toml --out DIR
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sgps.errors import ConfigError
from sgps.experiments.plan import ComparePlan, ProblemSource, read_plan
from sgps.experiments.problems import (
    ProblemFiles,
    changed_problem_files,
    count_levels,
    digest_key,
    pending_problems,
    problem_files,
    stored_digests,
    write_problems,
)
from sgps.outputs import ARCHIVE, COMPARISON, FOLDER, RUN, Output, check_outputs, folder_kind
from sgps.runs.archive import (
    DEFAULT_PART_BYTES,
    INDEX,
    ArchiveIndex,
    Member,
    extract_to_new_folder,
    read_index,
    write_archive,
)
from sgps.runs.packing import (
    PROBLEM_FILES,
    checkpoint_progress,
    left_out,
    pack_run,
    read_bytes,
    run_snapshot,
    unpack_run,
)
from sgps.runs.rundir import RunDirectory

COMPARISON_KIND = "comparison"
#: What a packer may replace in an archive folder given with --overwrite.
ARCHIVE_FILES = (INDEX,)


def pack(
    folder: Path,
    archive: Path,
    *,
    problems: Path | None = None,
    validation: Path | None = None,
    part_bytes: int = DEFAULT_PART_BYTES,
    overwrite: bool = False,
) -> ArchiveIndex:
    """Pack a comparison folder or a run folder (with the problem files it was trained on) into `archive`.

    `archive` is checked first (`sgps.outputs`): it may not lie inside the folder it packs,
    nor replace an input, and an archive already there is replaced only with `overwrite`.
    """
    inputs = (("PATH", folder), ("--problems", problems), ("--validation", validation))
    output = Output("--out", archive, FOLDER, result=True, replaces=ARCHIVE_FILES, owner=ARCHIVE, apart=True)
    check_outputs([output], inputs, overwrite=overwrite)
    if is_comparison(folder):
        if problems is not None or validation is not None:
            raise ConfigError(f"--problems and --validation are for a run folder; {folder} is a comparison, "
                              "whose problems are in its compare.toml")  # fmt: skip
        return pack_comparison(folder, archive, part_bytes=part_bytes, overwrite=overwrite)
    if not RunDirectory(folder).is_run_directory():
        raise ConfigError(f"{folder}: neither a run folder (`sgps train`) nor a comparison folder (`sgps compare`)")
    if problems is None:
        raise ConfigError(f"{folder} is a run folder: give the level file it was trained on (--problems, and "
                          "--validation if it had one), so that it can go on elsewhere")  # fmt: skip
    return pack_run(folder, archive, problems, validation, part_bytes=part_bytes, overwrite=overwrite)


def unpack(archive: Path, out: Path) -> ArchiveIndex:
    """Unpack a run or comparison archive into the new folder `out`."""
    kind = read_index(archive).kind
    owner = COMPARISON if kind == COMPARISON_KIND else RUN
    check_outputs([Output("--out", out, FOLDER, owner=owner, apart=True)], (("ARCHIVE", archive),))
    if out.exists():
        raise ConfigError(f"--out {out}: already exists; unpack into a new folder")
    if kind == COMPARISON_KIND:
        return unpack_comparison(archive, out)
    return unpack_run(archive, out)


def describe_archive(index: ArchiveIndex) -> list[str]:
    """One line per run of an archive: where its last checkpoint stands."""
    runs = (
        index.about.get("runs")
        if index.kind == COMPARISON_KIND
        else {index.about.get("run", "run"): index.about.get("progress")}
    )
    return [f"{name}: {_progress_line(progress)}" for name, progress in dict(runs or {}).items()]


def resume_command(index: ArchiveIndex, out: Path) -> str:
    """The command that goes on with the archive's runs once it is unpacked into `out`."""
    if index.kind == COMPARISON_KIND:
        return f"sgps compare {out / 'compare.toml'} --out {out}"
    members = {str(member["path"]) for member in index.members}
    validation = PROBLEM_FILES["validation"]
    extra = f" --validation {out / validation}" if validation in members else ""
    if "checkpoints/trainer.pt" not in members:  # stopped before its first checkpoint: nothing to go on from
        return (f"sgps train --problems {out / PROBLEM_FILES['train']}{extra} --out {out} --overwrite, with the "
                "options it was started with (it had no checkpoint yet)")  # fmt: skip
    return f"sgps train --problems {out / PROBLEM_FILES['train']}{extra} --out {out} --resume"


def _progress_line(progress: Any) -> str:
    if not isinstance(progress, dict) or not progress.get("checkpointed"):
        return "no checkpoint yet (it starts again from the beginning)"
    state = "finished: " + str(progress.get("stop_reason") or "done") if progress.get("finished") else "in progress"
    return (
        f"{progress.get('expansions', 0):,} expansions, iteration {progress.get('iteration')} batch "
        f"{progress.get('next_batch')} at budget {progress.get('budget')}, {progress.get('training_solved')} "
        f"training and {progress.get('validation_solved')} validation problems solved, "
        f"{progress.get('hours')} h, last on {progress.get('device') or 'an unrecorded device'}; {state}"
    )


def is_comparison(folder: Path) -> bool:
    """Whether `folder` is a comparison folder (`sgps compare` wrote its compare.toml)."""
    return folder_kind(folder) == COMPARISON


def pack_comparison(
    folder: Path, archive: Path, *, part_bytes: int = DEFAULT_PART_BYTES, overwrite: bool = False
) -> ArchiveIndex:
    """Pack the comparison folder `folder` into the archive `archive`, leaving out the sets it generated."""
    plan = read_plan(folder / "compare.toml", check_files=False, recorded=True)
    files = problem_files(plan, folder)
    regenerated = {path for path, source in _sources(plan, files) if source.file is None and path.exists()}
    if regenerated and changed_problem_files(files):
        raise ConfigError(f"{changed_problem_files(files)[0]}: its levels differ from the digest the comparison "
                          "recorded; restore it before packing")  # fmt: skip
    recorded = stored_digests(files)
    recreated = sorted(path for path in regenerated if digest_key(files, path) in recorded)
    counts = _regenerated_counts(folder, plan, files, recreated)
    members: dict[str, bytes] = {}
    progress: dict[str, Any] = {}
    runs = folder / "runs"
    for run in sorted(runs.iterdir()) if runs.is_dir() else []:
        if RunDirectory(run).is_run_directory():
            prefix = f"runs/{run.name}/"
            snapshot = run_snapshot(run, prefix=prefix)
            members.update(snapshot)
            run_progress = checkpoint_progress(run, snapshot, prefix)
            run_progress.pop("fingerprint", None)
            progress[run.name] = run_progress
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if left_out(path.name) or path in recreated or name in members or _in_run(folder, path):
            continue
        if path.is_symlink() or not (path.is_dir() or path.is_file()):
            raise ConfigError(f"{path}: not a regular file; an archive holds regular files only "
                              "(replace it by the file, or move it out of the comparison folder)")  # fmt: skip
        if path.is_file():
            members[name] = read_bytes(path)
    about = {"comparison": folder.name, "runs": progress,
             "regenerated": [digest_key(files, path) for path in recreated], "levels": counts,
             "resume": "sgps compare DIR/compare.toml --out DIR"}  # fmt: skip
    return write_archive(archive, COMPARISON_KIND, about, [Member(k, v) for k, v in members.items()],
                         part_bytes=part_bytes, overwrite=overwrite)  # fmt: skip


def unpack_comparison(archive: Path, out: Path) -> ArchiveIndex:
    """Unpack a comparison archive into the new folder `out`, generating the problem sets it left out."""

    def complete(index: ArchiveIndex, folder: Path) -> None:
        if index.kind != COMPARISON_KIND:
            raise ConfigError(f"{archive}: holds a {index.kind}, not a comparison")
        plan = read_plan(folder / "compare.toml", check_files=False, recorded=True)
        files = problem_files(plan, folder)
        _check_regenerated_counts(archive, plan, files, index.about.get("levels"))
        generated = [(path, source, states) for path, source, states in pending_problems(plan, files, str(archive))
                     if source.file is None]  # fmt: skip
        write_problems(plan.domain, generated)
        changed = changed_problem_files(files)
        if changed:
            raise ConfigError(f"{archive}: the {digest_key(files, changed[0])} set generated here differs from the "
                              "one the comparison recorded; unpack it with the sgps that packed it "
                              f"({index.packed.get('sgps', 'unknown version')})")  # fmt: skip

    return extract_to_new_folder(archive, out, complete)


def _regenerated_counts(folder: Path, plan: ComparePlan, files: ProblemFiles, recreated: list[Path]) -> dict[str, int]:
    """The levels of each set the archive leaves out (by `digest_key`), which unpacking generates
    again from compare.toml; a count in compare.toml other than the file's is refused, as the
    set unpacked would not be the one the runs searched."""
    sources = dict(_sources(plan, files))
    counts = {}
    for path in recreated:
        count = count_levels(path)
        if sources[path].count != count:
            raise ConfigError(f"{folder / 'compare.toml'}: asks for {sources[path].count:,} levels of "
                              f"{digest_key(files, path)}, but {path} holds {count:,}, the levels its runs "
                              "searched; restore the count before packing")  # fmt: skip
        counts[digest_key(files, path)] = count
    return counts


def _check_regenerated_counts(archive: Path, plan: ComparePlan, files: ProblemFiles, recorded: Any) -> None:
    """Refuse, before a level is generated, an archive whose compare.toml asks for another number of
    levels of a set than the comparison packed (`recorded`: the index's ``about.levels``; absent in
    archives packed before it was kept): a count raised to a million took minutes to hours of
    generating before the digests could tell the sets apart."""
    if not isinstance(recorded, dict):
        return
    for path, source in _sources(plan, files):
        key = digest_key(files, path)
        if source.file is None and not path.exists() and key in recorded and recorded[key] != source.count:
            count = f"{source.count:,}" if isinstance(source.count, int) else repr(source.count)
            raise ConfigError(f"{archive}: its compare.toml asks for {count} levels of {key}, but the comparison "
                              f"packed {recorded[key]!r}; the archive was edited: copy it again from where it "
                              "was packed")  # fmt: skip


def _sources(plan: ComparePlan, files: ProblemFiles) -> list[tuple[Path, ProblemSource]]:
    pairs: list[tuple[Path, ProblemSource | None]] = [(files.train, plan.train)]
    if files.validation is not None:
        pairs.append((files.validation, plan.validation))
    if files.hips is not None:
        pairs.append((files.hips, plan.hips_extra))
    pairs += [(files.tests[test.name], test.source) for test in plan.tests]
    return [(path, source) for path, source in pairs if source is not None]


def _in_run(folder: Path, path: Path) -> bool:
    """Whether `path` lies in a run folder of the comparison (packed by its snapshot)."""
    parts = path.relative_to(folder).parts
    return len(parts) >= 2 and parts[0] == "runs" and RunDirectory(folder / parts[0] / parts[1]).is_run_directory()
