"""Every signal gets its one line: a stopped command says so in one line on stderr and exits with
128 + the signal's number (SIGINT 130, SIGTERM 143, SIGHUP 129), whether the signal reaches the
process alone or its whole group; a command killed outright (SIGKILL) says nothing, and neither do
its search processes, which end with it; and `--quiet` leaves no progress bar on a terminal,
whatever the search processes.

The runs are those of tests/test_interrupts.py (its driver, its tiny training runs and checks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sgps.domains import get_domain, write_levels
from test_interrupts import (  # noqa: F401 (its autouse fixture, its /proc condition)
    TRAIN,
    OwnShm,
    Terminal,
    _command_line,
    _descendants,
    _no_process_left,
    alive,
    drive,
    levels,
    pytestmark,
    wait_for,
)


def train_argv(tmp_path: Path, evaluator: str) -> list[str]:
    """`sgps train` of a tiny run with two search processes around `evaluator` (with `--quiet`)."""
    problems = levels(tmp_path / "t.txt", 24)
    return ["train", "--problems", str(problems), "--out", str(tmp_path / "run"), *TRAIN, "--workers", "2",
            "--evaluator", evaluator]  # fmt: skip


def test_sighup_to_the_group_is_one_line_and_no_bar(tmp_path):
    """A closed terminal sends SIGHUP to the whole group, multiprocessing's resource tracker included: it used
    to die of it, and the pool's clean-up started another, which printed a warning and a `KeyError` traceback
    per semaphore after the command's line."""
    argv = train_argv(tmp_path, "per-process")
    code, lines = drive(tmp_path, "search", "SIGHUP:group", argv, after=tmp_path / "run" / "checkpoints" / "trainer.pt",
                        terminal=True)  # fmt: skip
    assert (code, lines) == (128 + signal.SIGHUP, ["sgps: stopped by SIGHUP"])


def test_sigint_to_the_training_process_alone_is_130_in_one_line_and_no_bar(tmp_path):
    """`kill -INT PID`: the search processes, which ignore Ctrl-C, are stopped by the training process."""
    argv = train_argv(tmp_path, "shared")
    code, lines = drive(tmp_path, "search", "SIGINT", argv, after=tmp_path / "run" / "checkpoints" / "trainer.pt",
                        terminal=True)  # fmt: skip
    assert (code, lines) == (130, ["sgps: interrupted"])


def test_the_terminal_of_these_tests_shows_a_progress_bar():
    """`Terminal` is one where tqdm draws: the two tests above would see a bar that --quiet left."""
    with Terminal() as screen:
        subprocess.run([sys.executable, "-c", "from tqdm import tqdm; list(tqdm(range(3), disable=None))"],
                       stderr=screen.slave, check=True, timeout=60)  # fmt: skip
        assert "3/3" in screen.text()


#: `sgps ARGV` whose resource sharer (which hands the weights' shared memory to the search processes) lets the
#: first search process that asks connect, then kills the training process: the worker is then unpickling
#: the weights of its share, before any code of sgps runs in it.
KILLED_WHILE_WEIGHTS_TRAVEL = r"""
import json, os, signal, sys
from multiprocessing import resource_sharer
from pathlib import Path


def descendants(pid):
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread that has ended
            pass
    return found + [grandchild for child in found for grandchild in descendants(child)]


if __name__ == "__main__":
    note, *argv = sys.argv[1:]

    def serve(self):
        self._listener.accept()
        Path(note).write_text(json.dumps(descendants(os.getpid())))
        os.kill(os.getpid(), signal.SIGKILL)

    resource_sharer._ResourceSharer._serve = serve
    from sgps.cli import main
    sys.exit(main(argv))
"""


def test_workers_killed_with_their_training_process_while_the_weights_travel_say_nothing(tmp_path):
    """The per-process pool's workers unpickle each share's weights, whose file descriptors the training process
    hands over; a training process killed meanwhile used to leave a traceback from the worker, raised inside
    `concurrent.futures`, before any code of sgps ran in it (`sgps.execution.pool.SharedWeights`)."""
    driver, note = tmp_path / "driver.py", tmp_path / "children.json"
    driver.write_text(KILLED_WHILE_WEIGHTS_TRAVEL)
    own = OwnShm()
    process = subprocess.Popen([sys.executable, str(driver), str(note), *train_argv(tmp_path, "per-process")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)  # fmt: skip
    own.watch(process.pid)
    _, err = process.communicate(timeout=240)  # until every process holding the pipe is gone
    assert process.returncode == -signal.SIGKILL and note.exists(), (process.returncode, err)
    spawned = json.loads(note.read_text())
    wait_for(lambda: not any(alive(pid) for pid in spawned), 15)
    assert err == "", err
    assert own.left() == []


def test_a_ctrl_c_while_a_finished_command_exits_changes_nothing(tmp_path):
    """A Ctrl-C after the command's work, while the interpreter exits (its atexit callbacks, then with the
    signal's default action back), used to print an "Exception ignored in atexit callback" traceback or end
    the process by the signal; it is ignored, and the command's own status stands."""
    out = tmp_path / "g.txt"
    process = subprocess.Popen([sys.executable, "-m", "sgps", "generate", "tsp", "--count", "1", "--out", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_with_ctrl_c)  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().startswith("wrote 1 tsp level")
    os.kill(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) in ((0, ""), (130, "sgps: interrupted\n")), (process.returncode, err)
    assert out.exists()


def _with_ctrl_c() -> None:
    """Start a child as a terminal would: in a session of its own, Ctrl-C's default action set."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setsid()


def test_solver_processes_end_with_a_dataset_build_killed_outright(tmp_path):
    """`sgps dataset --workers 2` killed with SIGKILL used to leave its solver processes running for good."""
    # Four levels the solver needs some 20 s each for (it stops at the default state cap, 472,597 states), so the build
    # is still solving when it is killed: 60 small levels were sometimes all solved before the solver
    # processes could be seen.
    domain = get_domain("tsp")
    problems = tmp_path / "t.txt"
    write_levels(problems, domain, [domain.generate(seed, size=32, cities=20) for seed in range(4)])
    argv = [sys.executable, "-m", "sgps", "dataset", "tsp", "--problems", str(problems), "--out",
            str(tmp_path / "data.npz"), "--workers", "2"]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    try:
        solvers: list[int] = []

        def started() -> bool:
            solvers[:] = [pid for pid in _descendants(process.pid) if b"resource_tracker" not in _command_line(pid)]
            return (len(solvers) >= 2 and all(map(_ignores_ctrl_c, solvers))) or process.poll() is not None

        # Killed once both solvers have run their set-up: a kill while the build still writes a solver's
        # start-up data to its pipe leaves Python's own EOFError in that process, before any code of sgps.
        wait_for(started, 120)
        assert process.poll() is None, "the build ended before its solver processes could be seen"
        process.kill()
        _, err = process.communicate(timeout=60)
        wait_for(lambda: not any(alive(pid) for pid in solvers), 15)
    finally:
        if process.poll() is None:
            process.kill()
    assert err == "", err


def _ignores_ctrl_c(pid: int) -> bool:
    """Whether process `pid` ignores SIGINT: a solver process does once its set-up (`guard_solver_process`) ran,
    which comes after it read its start-up data."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    ignored = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(ignored & (1 << (signal.SIGINT - 1)))


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda n: n.name)
def test_a_stop_signal_while_the_program_imports_is_one_line(tmp_path, number):
    """The seconds of importing PyTorch used to end a Ctrl-C in a `KeyboardInterrupt` traceback, SIGTERM and
    SIGHUP without a word (`sgps.__main__`)."""
    # The program, held in its import of the command line by a slow module.
    slow = tmp_path / "slow.py"
    slow.write_text("import time\nprint('started', flush=True)\ntime.sleep(30)\n")
    argv = [sys.executable, "-c", "import sys, builtins, sgps.__main__ as m\n"
            "real = builtins.__import__\n"
            "def slowly(name, *args, **kwargs):\n"
            "    if name == 'sgps.cli':\n"
            "        import slow\n"
            "    return real(name, *args, **kwargs)\n"
            "builtins.__import__ = slowly\n"
            "m.run()"]  # fmt: skip
    path = f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": path})  # fmt: skip
    assert process.stdout.readline() == "started\n"
    process.send_signal(number)
    code, err = process.wait(timeout=60), process.stderr.read()
    stopped = "sgps: interrupted" if number == signal.SIGINT else f"sgps: stopped by {signal.Signals(number).name}"
    assert (code, err) == (128 + number, stopped + "\n")


def test_dataset_quiet_draws_no_bar_on_a_terminal(tmp_path):
    """`sgps dataset` draws a bar on a terminal; `--quiet` leaves it out, as `train --quiet` does (and
    `test --quiet`, whose bar shows only after a second of searching, by the same `_bar_off`)."""
    problems = levels(tmp_path / "t.txt", 12)
    shown = {}
    for quiet in (False, True):
        argv = [sys.executable, "-m", "sgps", "dataset", "tsp", "--problems", str(problems), "--out",
                str(tmp_path / f"data-{quiet}.npz"), "--workers", "1", *(["--quiet"] if quiet else [])]  # fmt: skip
        with Terminal() as screen:
            subprocess.run(argv, stderr=screen.slave, stdout=subprocess.DEVNULL, check=True, timeout=120,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
            shown[quiet] = "solving" in screen.text()
    assert shown == {False: True, True: False}
