"""Where a comparison's commands run: child processes here, or Ray tasks on a cluster's nodes.

The scheduler (`sgps.experiments.runner`) starts each step of a run (`sgps train`, then
`sgps test` per test set) through a launcher and polls what it started:

- `LocalLauncher` (the default): a child process of this machine;
- `RayLauncher` (`sgps compare --executor ray`): a Ray task that runs the same command
  on whichever node has `threads` CPUs free, so whole (algorithm, seed) runs spread over
  the cluster. The command writes its run directory and log where the driver named
  them, so every node must see the comparison folder at the same path (a shared file
  system), and have the same Python environment with `sgps` installed.

Stopping a step (Ctrl-C, SIGTERM) terminates the command, which loses at most the batch
in flight: the next `sgps compare` resumes it from its last checkpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Protocol

#: Seconds a stopped command gets to exit before it is killed.
STOP_SECONDS = 30
#: How often a Ray task looks whether its command has ended.
POLL_SECONDS = 0.5


class Launched(Protocol):
    """A started command."""

    def poll(self) -> int | None:
        """Its exit status once it has ended, else None."""
        ...

    def stop(self) -> None:
        """End it (terminate, then kill) and wait for it."""
        ...


class Launcher(Protocol):
    """Starts the commands of a comparison."""

    def start(self, arguments: Sequence[str], threads: int, log: Path) -> Launched:
        """Run ``python -m sgps ARGUMENTS`` with `threads` torch/OpenMP threads, output appended to `log`."""
        ...


def sgps_command(arguments: Sequence[str]) -> list[str]:
    """The command line of ``sgps ARGUMENTS`` in this interpreter."""
    return [sys.executable, "-m", "sgps", *arguments]


def thread_environment(threads: int) -> dict[str, str]:
    """This process's environment with `threads` OpenMP / MKL threads."""
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def start_child(arguments: Sequence[str], threads: int, output: IO[bytes]) -> subprocess.Popen[bytes]:
    """``sgps ARGUMENTS`` as a child process with `threads` threads, its output to `output`."""
    return subprocess.Popen(sgps_command(arguments), stdin=subprocess.DEVNULL, stdout=output,
                            stderr=subprocess.STDOUT, env=thread_environment(threads))  # fmt: skip


def end_child(child: subprocess.Popen[bytes]) -> None:
    """Terminate `child`, kill it if it has not ended within `STOP_SECONDS`, and wait for it."""
    child.terminate()
    try:
        child.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


class LocalProcess:
    """A child process of this machine and the log file it writes."""

    def __init__(self, arguments: Sequence[str], threads: int, log: Path) -> None:
        self._output: IO[bytes] = open(log, "ab")  # noqa: SIM115 (closed when the child ends)
        try:
            self.process = start_child(arguments, threads, self._output)
        except BaseException:
            self._output.close()
            raise

    def poll(self) -> int | None:
        code = self.process.poll()
        if code is not None:
            self._output.close()
        return code

    def stop(self) -> None:
        end_child(self.process)
        self._output.close()


class LocalLauncher:
    """Every command in a child process of this machine."""

    def start(self, arguments: Sequence[str], threads: int, log: Path) -> Launched:
        return LocalProcess(arguments, threads, log)


def run_logged(arguments: Sequence[str], threads: int, log: str) -> int:
    """Run ``sgps ARGUMENTS`` to its end with output appended to `log`; its exit status.

    The body of a Ray task: it runs on a node of the cluster, with that node's Python.
    When Ray cancels the task, the interruption ends the child too.
    """
    with open(log, "ab") as output:
        child = start_child(arguments, threads, output)
        try:
            while child.poll() is None:  # a polling wait: Ray's cancel interrupts the sleep, not a blocking wait
                time.sleep(POLL_SECONDS)
        finally:
            if child.poll() is None:
                end_child(child)
    return child.returncode


class RayTask:
    """A command running as a Ray task."""

    def __init__(self, ray: Any, reference: Any) -> None:
        self.ray = ray
        self.reference = reference
        self.code: int | None = None

    def poll(self) -> int | None:
        if self.code is None:
            ready, _ = self.ray.wait([self.reference], timeout=0)
            if ready:
                try:
                    self.code = int(self.ray.get(self.reference))
                except self.ray.exceptions.RayError:  # the node or the task died: the run resumes later
                    self.code = 1
        return self.code

    def stop(self) -> None:
        if self.poll() is not None:
            return
        self.ray.cancel(self.reference)  # interrupts the task, which ends its child
        ready, _ = self.ray.wait([self.reference], timeout=STOP_SECONDS)
        if not ready:
            self.ray.cancel(self.reference, force=True)


class RayLauncher:
    """Every command as a Ray task asking for `threads` CPUs, placed by Ray on the cluster's nodes."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self._remote = ray.remote(run_logged)

    def start(self, arguments: Sequence[str], threads: int, log: Path) -> Launched:
        task = self._remote.options(num_cpus=threads, max_retries=0)
        return RayTask(self.ray, task.remote(list(arguments), threads, str(log.resolve())))


def largest_node_cpus(ray: Any) -> int:
    """The CPUs of the cluster's largest live node (a task can ask for no more than that)."""
    sizes = [int(node.get("Resources", {}).get("CPU", 0)) for node in ray.nodes() if node.get("Alive")]
    return max([*sizes, 1])
