"""Follow a training run live in TensorBoard (`sgps train --tensorboard DIR`).

A `LoopListener` of the Bootstrap loop that writes TensorBoard event files. The step of
every scalar is the run's cumulative training expansions, the paper's x-axis; each event's
time is the loop's own wall clock (seconds since the run started, resumes added up and
the time between them left out), so TensorBoard's *Relative* axis shows training time.

Scalars (step = cumulative expansions):

- ``train/outstanding``, ``train/solved_in_batch``, ``train/solved_in_pass`` (searches of
  the pass so far that solved their problem), ``train/budget``, ``train/pass``,
  ``train/expansions_per_second`` (the batch's expansions over the loop time since the
  batch before: search, learning and validation included);
- ``validation/solved`` (at each end of pass) and ``validation/solved_ever``;
- ``learning/NAME`` for every number the method reports per batch (metrics/learning.csv:
  every loss, the codebook's use (codes used, perplexity), the π_low probe, ...).

Text: ``config``, the run's resolved config.toml, at step 0.

A resumed run writes to the same folder. Batches after the last checkpoint were logged
once already and are searched again; the new writer's purge step (the checkpoint's
cumulative expansions + 1) tells TensorBoard's reader to drop those events, so no step
appears twice and no series restarts at 0.

The name of every event file a run writes ends with its tag (`run_tag`, a digest of the
run directory's absolute path). A run started again with ``--overwrite`` deletes the
event files with its tag from its TensorBoard folder first (`remove_run_events`), so the
old run's steps are not mixed with the new one's; every other file there is kept (the
events of other runs, of a run directory that was moved, or of sgps before the tags).

TensorBoard is an optional dependency (the ``tensorboard`` extra).
"""

from __future__ import annotations

import hashlib
import numbers
from pathlib import Path
from typing import Any

from sgps.errors import ConfigError
from sgps.training.bootstrap import BatchRecord, PassRecord

INSTALL_HINT = "pip install -c constraints.txt -e '.[tensorboard]' (or: pip install tensorboard)"


def require_tensorboard() -> None:
    """Raise `ConfigError` with the install command when TensorBoard is missing (checked before a run starts)."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        raise ConfigError(f"--tensorboard needs TensorBoard, which is not installed: {INSTALL_HINT}") from None


def run_tag(run: Path) -> str:
    """The end of the names of the event files the run in directory `run` writes (module docstring)."""
    return ".sgps-" + hashlib.sha256(str(run.resolve()).encode()).hexdigest()[:16]


def remove_run_events(log_dir: Path, run: Path) -> int:
    """Delete the event files in `log_dir` that the run in `run` wrote (named with its `run_tag`); how many.

    Nothing else in `log_dir` is touched, nor is anything below it.
    """
    if not log_dir.is_dir():
        return 0
    removed = 0
    for path in log_dir.glob(f"events.out.tfevents.*{run_tag(run)}"):
        if path.is_file() or path.is_symlink():
            path.unlink()
            removed += 1
    return removed


class TensorBoardLog:
    """Writes a run's progress to TensorBoard event files in `log_dir` (module docstring)."""

    def __init__(
        self, log_dir: Path, run: Path, *, config_text: str | None, resumed_at: int | None, seconds: float
    ) -> None:
        """`run`: the run directory (its `run_tag` ends the event files' names); `config_text`: written as
        the ``config`` text (fresh runs); `resumed_at`: the cumulative expansions of the checkpoint a
        resumed run continues from; `seconds`: its loop clock then."""
        require_tensorboard()
        from torch.utils.tensorboard import SummaryWriter

        if log_dir.exists() and not log_dir.is_dir():
            raise ConfigError(f"{log_dir}: --tensorboard needs a folder, and this is a file")
        purge = None if resumed_at is None else resumed_at + 1
        self.writer = SummaryWriter(str(log_dir), purge_step=purge, filename_suffix=run_tag(run))
        self.previous_seconds = seconds
        if config_text is not None:
            self.writer.add_text("config", f"```\n{config_text}\n```", global_step=0, walltime=seconds)

    def batch_done(self, record: BatchRecord) -> None:
        step, time = record.cumulative_expansions, record.seconds
        elapsed = record.seconds - self.previous_seconds
        self.previous_seconds = record.seconds
        scalars: dict[str, Any] = {
            "train/outstanding": record.outstanding,
            "train/solved_in_batch": record.solved,
            "train/solved_in_pass": record.solved_in_pass,
            "train/budget": record.budget,
            "train/pass": record.iteration,
            "train/expansions_per_second": record.expansions / elapsed if elapsed > 0 else None,
        }
        for name, value in record.report.items():
            scalars[f"learning/{name}"] = value
        for tag, value in scalars.items():
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                self.writer.add_scalar(tag, float(value), global_step=step, walltime=time)
        self.writer.flush()

    def pass_done(self, record: PassRecord) -> None:
        step, time = record.cumulative_expansions, record.seconds
        self.writer.add_scalar("validation/solved", record.validation_solved, global_step=step, walltime=time)
        self.writer.add_scalar("validation/solved_ever", record.validation_solved_ever, global_step=step,
                               walltime=time)  # fmt: skip
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
