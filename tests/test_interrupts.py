"""Stopping a training run: SIGTERM and Ctrl-C stop it in one line and take its search processes with it;
a search process killed mid-batch is one error line; workers end when their training process is killed.

Then the phase × signal table: `sgps train` (a batch's search, its learning update, the validation, the
checkpoint), `sgps test`, `sgps dataset` and `sgps compare`, each signalled in the middle of its phase."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from sgps.cli import main
from sgps.domains import get_domain, write_levels

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from /proc")


def levels(path: Path, count: int = 48) -> Path:
    domain = get_domain("tsp")
    write_levels(path, domain, [domain.generate(seed) for seed in range(count)])
    return path


@pytest.fixture(autouse=True)
def _no_process_left(monkeypatch):
    """Kill every training process a test started, whatever became of the test."""
    started: list[subprocess.Popen[str]] = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        process = real(*args, **kwargs)
        started.append(process)
        return process

    monkeypatch.setattr(subprocess, "Popen", popen)
    yield
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def start_training(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    """`sgps train` in a session of its own, with Ctrl-C's default action (as a terminal starts it)."""
    command = [sys.executable, "-m", "sgps", "train", "--problems", str(levels(tmp_path / "t.txt")), "--out",
               str(tmp_path / "run"), "--algorithm", "phs-sg", "--preset", "tiny", "--quiet", "--device", "cpu",
               "--max-iterations", "3", *extra]  # fmt: skip

    def reset() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.setsid()

    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=reset)


def children(pid: int) -> list[int]:
    """The search processes a training process started (not multiprocessing's resource tracker)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return [child for child in found if b"spawn_main" in _command_line(child)]


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_for(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def searching_workers(process: subprocess.Popen[str], run: Path, count: int) -> list[int]:
    """The worker pids once the run's first checkpoint is written (the pool is up and searching)."""
    wait_for(lambda: (run / "checkpoints" / "trainer.pt").exists())
    wait_for(lambda: len(children(process.pid)) >= count)
    return children(process.pid)


@pytest.mark.parametrize("evaluator", ["per-process", "shared"])
def test_sigterm_stops_a_run_in_one_line_with_its_workers_and_it_resumes(tmp_path, capsys, evaluator):
    process = start_training(tmp_path, "--workers", "2", "--evaluator", evaluator)
    workers = searching_workers(process, tmp_path / "run", 2)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM
    assert err.strip().splitlines() == ["sgps: stopped by SIGTERM"], err
    wait_for(lambda: not any(alive(pid) for pid in workers), 15)
    # resumed in this process without search processes (as the phase table below resumes): what is checked is the
    # run directory the signal left, and two more spawned interpreters would only add start-up time
    code, err = sgps(capsys, "train", "--problems", str(tmp_path / "t.txt"), "--out", str(tmp_path / "run"),
                     "--resume", "--quiet", "--max-iterations", "1", "--workers", "1")  # fmt: skip
    assert code == 0, err


def test_ctrl_c_to_the_group_gives_one_line_and_no_worker_tracebacks(tmp_path):
    process = start_training(tmp_path, "--workers", "2", "--evaluator", "per-process")
    workers = searching_workers(process, tmp_path / "run", 2)
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err.strip().splitlines() == ["sgps: interrupted"]
    wait_for(lambda: not any(alive(pid) for pid in workers), 15)


def test_a_killed_worker_is_one_error_line(tmp_path):
    process = start_training(tmp_path, "--workers", "2", "--evaluator", "shared")
    workers = searching_workers(process, tmp_path / "run", 2)
    os.kill(workers[0], signal.SIGKILL)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sgps: error: search process") and "--resume" in lines[0]


# -- the phase × signal table ---------------------------------------------------------------
#
# Each case runs a small driver (`DRIVER`, written to a file) in a session of its own: it
# patches one function of the phase so that, once the phase is reached, the process signals
# itself (SIGTERM to itself; SIGINT to its whole group, as Ctrl-C in a terminal does, or to
# itself for `compare`), after noting every process it has started; then it runs
# `sgps.cli.main`. The signal so arrives in the middle of the phase, whatever the timing.

DRIVER = r'''
import json, os, signal, sys
from pathlib import Path

def descendants(pid):
    found = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return found
    for task in tasks:
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except FileNotFoundError:
            pass
    return found + [grandchild for child in found for grandchild in descendants(child)]

if __name__ == "__main__":  # spawned workers import this file as __mp_main__: they run none of it
    phase, how, note, after, *argv = sys.argv[1:]
    sig = signal.Signals[how.split(":")[0]]
    fired = []
    state = {"phase": None}

    def fire(where):
        """Signal this process (or its group) once, in `where`, once `after` exists."""
        if fired or where != phase or (after != "-" and not Path(after).exists()):
            return
        fired.append(where)
        Path(note).write_text(json.dumps(descendants(os.getpid())))
        if how.endswith(":group"):
            os.killpg(os.getpgid(0), sig)
        else:
            os.kill(os.getpid(), sig)

    def within(name, function):
        def wrapper(*args, **kwargs):
            outer, state["phase"] = state["phase"], name
            try:
                return function(*args, **kwargs)
            finally:
                state["phase"] = outer
        return wrapper

    import concurrent.futures
    from torch.optim.optimizer import register_optimizer_step_pre_hook
    from sgps.execution import shared
    from sgps.runs import rundir, testing
    from sgps.training import bootstrap
    from sgps.training.methods.hips import dataset
    from sgps.experiments import runner

    # `sgps train`: the phase is set around a training batch's search, its learning update, the validation
    Bootstrap = bootstrap.Bootstrap
    Bootstrap._train_batch = within("search", Bootstrap._train_batch)  # its learning update sets "learn"
    Bootstrap._validate = within("validate", Bootstrap._validate)
    real_init = Bootstrap.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.method.learn = within("learn", self.method.learn)
    Bootstrap.__init__ = init
    real_lockstep = bootstrap.search_lockstep

    def lockstep(*args, **kwargs):  # in this process: once the first search of the batch has ended
        return real_lockstep(*args, on_result=lambda *_: fire(state["phase"]), **kwargs)
    bootstrap.search_lockstep = lockstep
    real_answer = shared.EvaluationServer._answer

    def answer(*args, **kwargs):  # a shared evaluator: after answering the workers' first requests
        real_answer(*args, **kwargs)
        fire(state["phase"])
    shared.EvaluationServer._answer = answer
    real_submit = concurrent.futures.ProcessPoolExecutor.submit

    def submit(*args, **kwargs):  # model copies, and the dataset's solvers: once a worker has its share
        future = real_submit(*args, **kwargs)
        fire(state["phase"] or "solve")
        return future
    concurrent.futures.ProcessPoolExecutor.submit = submit
    register_optimizer_step_pre_hook(lambda *_: fire(state["phase"]))
    real_write = rundir.atomic_write_bytes

    def write(*args, **kwargs):  # the model written, trainer.pt not yet
        fire("checkpoint")
        return real_write(*args, **kwargs)
    rundir.atomic_write_bytes = write
    # `sgps test`: once the round's first attempt is recorded
    real_record = testing._record_rounds

    def record(*args, **kwargs):
        real_record(*args, **kwargs)
        fire("test")
    testing._record_rounds = record
    # `sgps compare`: once a child run has written its first checkpoint
    real_lines = runner.Scheduler._status_lines

    def lines(self, *args, **kwargs):
        if any(job.status == "training" and (job.path / "checkpoints" / "trainer.pt").exists() for job in self.jobs):
            fire("compare")
        return real_lines(self, *args, **kwargs)
    runner.Scheduler._status_lines = lines

    from sgps.cli import main
    code = main(argv)
    sys.exit(code if fired else 99)  # 99: the phase was never reached
'''

#: One pass of two batches (24 levels, a few held out for validation): checkpoint, batch, checkpoint, validation.
TRAIN = ["--algorithm", "phs-sg", "--preset", "tiny", "--quiet", "--device", "cpu", "--max-iterations", "1"]
#: What a command prints on stderr when stopped, and its exit status.
STOPPED = {"SIGTERM": ("sgps: stopped by SIGTERM", 143), "SIGINT": ("sgps: interrupted", 130),
           "SIGHUP": ("sgps: stopped by SIGHUP", 129)}  # fmt: skip


def shm() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


def held_in_shm(pids: list[int]) -> set[str]:
    """The /dev/shm entries that the processes `pids` have open or mapped."""
    held = set()
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                if " /dev/shm/" in line:
                    held.add(line.split(" /dev/shm/", 1)[1].split(" ")[0])
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("/dev/shm/"):
                    held.add(target.removeprefix("/dev/shm/").split(" ")[0])
        except OSError:  # the process has ended, or a descriptor closed meanwhile
            continue
    return held


class OwnShm:
    """The /dev/shm entries one command's processes made: those that appeared after it started and that the
    command or one of its descendants had open or mapped (looked at every 0.1 s while it runs). Entries other
    programs make meanwhile (another test session's semaphores, say) are not counted."""

    def __init__(self) -> None:
        self.before = shm()
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, pid: int) -> None:
        """Look at the process `pid` and its descendants until `left`."""

        def look() -> None:
            while True:
                self.seen |= held_in_shm([pid, *_descendants(pid)])
                if self._stop.wait(0.1):
                    return

        self._thread = threading.Thread(target=look, daemon=True)
        self._thread.start()

    def left(self) -> list[str]:
        """The command's entries still in /dev/shm once its processes are gone (after a moment for
        multiprocessing's resource tracker, which removes what a killed process left behind)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        deadline = time.monotonic() + 2
        while (shm() - self.before) & self.seen and time.monotonic() < deadline:
            time.sleep(0.1)
        return sorted((shm() - self.before) & self.seen)


def drive(tmp_path: Path, phase: str, how: str, argv: list[str], after: Path | None = None, *, children: bool = True,
          terminal: bool = False):  # fmt: skip
    """Run `sgps ARGV` under the driver, signalled `how` in `phase`: its exit status and stderr lines, once
    every process it had started is gone and none of them left anything in /dev/shm (`OwnShm`).
    `terminal`: stderr is a terminal (`Terminal`), where a progress bar not silenced would be drawn."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    note = tmp_path / f"children-{phase}.json"
    own = OwnShm()

    def reset() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.setsid()

    with contextlib.ExitStack() as stack:
        screen = stack.enter_context(Terminal()) if terminal else None
        process = subprocess.Popen([sys.executable, str(driver), phase, how, str(note), str(after or "-"), *argv],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE if screen is None else screen.slave,
                                   text=True, preexec_fn=reset)  # fmt: skip
        own.watch(process.pid)
        _, err = process.communicate(timeout=240)
        if screen is not None:
            err = screen.text()
    assert process.returncode != 99 and note.exists(), f"{phase} never reached ({process.returncode}): {err}"
    spawned = [int(pid) for pid in json.loads(note.read_text())]
    assert spawned or not children, "no process of the command's was running when the signal came"
    wait_for(lambda: not any(alive(pid) for pid in spawned), 15)
    left = own.left()
    assert not left, f"left in /dev/shm: {left}"
    return process.returncode, err.strip().splitlines()


class Terminal:
    """A pseudo-terminal of 120 columns for a child's stderr (tqdm draws nothing on one of 0 columns).

    `slave` goes to the child; `text()`, once the child has ended, is what it wrote there (read as
    it comes, so that a child writing much never waits on a full terminal), lines ending in "\\n"."""

    def __enter__(self) -> Terminal:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 1 << 16)
            except OSError:  # EIO: every process holding the terminal has closed it
                return
            if not chunk:
                return
            self._chunks.append(chunk)

    def text(self) -> str:
        self._close_slave()
        self._reader.join(timeout=30)
        return b"".join(self._chunks).decode(errors="replace").replace("\r\n", "\n")

    def _close_slave(self) -> None:
        if self.slave >= 0:
            os.close(self.slave)
            self.slave = -1

    def __exit__(self, *exc: object) -> None:
        self._close_slave()
        os.close(self.master)


def sgps(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """`sgps ARGV` in this process (no second interpreter to start): its exit status and stderr."""
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().err


def how_to_signal(name: str) -> str:
    """SIGINT as Ctrl-C and SIGHUP as a closed terminal send them (to the whole group, multiprocessing's
    resource tracker included), SIGTERM as `kill` does (to the process)."""
    return f"{name}:group" if name in ("SIGINT", "SIGHUP") else name


TRAIN_CASES = [
    *[(phase, name, "1", None) for phase in ("search", "learn", "validate", "checkpoint")
      for name in ("SIGINT", "SIGTERM")],
    ("search", "SIGINT", "2", "shared"),
    ("search", "SIGTERM", "2", "per-process"),
    ("validate", "SIGTERM", "2", "shared"),
]  # fmt: skip


@pytest.mark.parametrize(("phase", "name", "workers", "evaluator"), TRAIN_CASES)
def test_train_stops_in_every_phase_and_resumes(tmp_path, capsys, phase, name, workers, evaluator):
    problems, run = levels(tmp_path / "t.txt", 24), tmp_path / "run"
    extra = ["--evaluator", evaluator] if evaluator else []
    argv = ["train", "--problems", str(problems), "--out", str(run), *TRAIN, "--workers", workers, *extra]
    code, lines = drive(
        tmp_path, phase, how_to_signal(name), argv, after=run / "checkpoints" / "trainer.pt", children=workers != "1"
    )
    line, status = STOPPED[name]
    assert (code, lines) == (status, [line])
    code, err = sgps(capsys, "train", "--problems", str(problems), "--out", str(run), "--resume", "--quiet",
                     "--workers", "1")  # fmt: skip
    assert code == 0, err


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished run to test, trained in this process (what is signalled is `sgps test`, not this)."""
    folder = tmp_path_factory.mktemp("trained")
    problems = levels(folder / "t.txt", 24)
    assert main(["train", "--problems", str(problems), "--out", str(folder / "run"), *TRAIN, "--workers", "1"]) == 0
    return folder / "run"


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_test_stops_while_searching_and_runs_again(tmp_path, capsys, trained, name):
    problems = levels(tmp_path / "test.txt", 12)
    argv = ["test", str(trained), "--problems", str(problems), "--budget", "300"]
    code, lines = drive(tmp_path, "test", how_to_signal(name), argv, children=False)
    assert (code, lines) == (STOPPED[name][1], [STOPPED[name][0]])
    code, err = sgps(capsys, *argv)
    assert code == 0, err
    assert list((trained / "metrics").glob("test-*.csv")), "no test record"


def test_a_test_with_search_processes_stops_in_one_line_mid_stream_and_runs_again(tmp_path, capsys, trained):
    """SIGTERM once the first result has come back from two search processes that are still
    searching (`SearchPool.search_stream`): one line, the processes gone, nothing left in
    /dev/shm, and the test runs again to its record."""
    problems = levels(tmp_path / "test.txt", 12)
    argv = ["test", str(trained), "--problems", str(problems), "--budget", "300", "--workers", "2"]
    code, lines = drive(tmp_path, "test", how_to_signal("SIGTERM"), argv)
    assert (code, lines) == (STOPPED["SIGTERM"][1], [STOPPED["SIGTERM"][0]])
    code, err = sgps(capsys, *argv)
    assert code == 0, err
    assert list((trained / "metrics").glob("test-*.csv")), "no test record"


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_dataset_stops_while_solving_and_runs_again(tmp_path, capsys, name):
    problems, out = levels(tmp_path / "t.txt", 30), tmp_path / "data.npz"
    argv = ["dataset", "tsp", "--problems", str(problems), "--out", str(out), "--workers", "2"]
    code, lines = drive(tmp_path, "solve", how_to_signal(name), argv)
    assert (code, lines) == (STOPPED[name][1], [STOPPED[name][0]])
    code, err = sgps(capsys, *argv)
    assert code == 0, err
    assert out.exists()


COMPARE = """[compare]
domain = "tsp"
algorithms = ["phs"]
seeds = [0]
preset = "tiny"

[problems.train]
variant = "standard"
seed = 0
count = 28
validation = 4

[tests.test]
variant = "standard"
seed = 9000
count = 4
budget = 300
rounds = 1

[train.bootstrap]
max_iterations = 1
initial_budget = 250
"""


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_compare_stops_with_its_child_runs_and_runs_again(tmp_path, capsys, name):
    config, out = tmp_path / "compare.toml", tmp_path / "out"
    config.write_text(COMPARE)
    argv = ["compare", str(config), "--out", str(out), "--jobs", "1", "--threads", "1"]
    code, lines = drive(tmp_path, "compare", name, argv)
    assert (code, lines) == (STOPPED[name][1], [STOPPED[name][0]])
    code, err = sgps(capsys, *argv)
    assert code == 0, err


@pytest.mark.parametrize("evaluator", ["per-process", "shared"])
def test_workers_end_without_a_word_when_their_training_process_is_killed_and_leave_nothing_in_dev_shm(
    tmp_path, evaluator
):
    """The shared evaluator's workers used to print an `EOFError` or `BrokenPipeError` traceback each, and
    multiprocessing's resource tracker a warning about the semaphores of the per-process pool it removed."""
    own = OwnShm()
    process = start_training(tmp_path, "--workers", "2", "--evaluator", evaluator)
    own.watch(process.pid)
    workers = searching_workers(process, tmp_path / "run", 2)
    everything = _descendants(process.pid)  # the workers and multiprocessing's resource tracker
    process.kill()
    _, err = process.communicate(timeout=60)  # until every process holding the pipe is gone
    wait_for(lambda: not any(alive(pid) for pid in everything), 15)
    assert err == "", err
    assert set(workers) <= set(everything)
    left = own.left()
    assert not left, f"left in /dev/shm: {left}"


def _descendants(pid: int) -> list[int]:
    found = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(child) for child in (task / "children").read_text().split()]
    except OSError:  # the process (or a thread of it) has ended
        pass
    return found + [grandchild for child in found for grandchild in _descendants(child)]


def test_a_killed_solver_process_is_replaced_and_the_dataset_is_the_undamaged_one(tmp_path):
    """A solver process of `sgps dataset` killed mid-build (by the user, another program or the kernel)
    used to end the build in a `BrokenProcessPool` traceback: its unfinished levels now go to a fresh pool."""
    from sgps.domains import read_levels
    from sgps.training.methods.hips.dataset import build_dataset, write_dataset

    domain = get_domain("boxworld")
    problems = tmp_path / "b.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(60)])
    out = tmp_path / "d.npz"
    process = subprocess.Popen([sys.executable, "-m", "sgps", "dataset", "boxworld", "--problems", str(problems),
                                "--out", str(out), "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # fmt: skip
    journal = tmp_path / "d.npz.journal"
    wait_for(lambda: journal.exists() and journal.read_text().count("\n") >= 3 and len(children(process.pid)) == 2)
    os.kill(children(process.pid)[0], signal.SIGKILL)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0 and "Traceback" not in err, err
    write_dataset(tmp_path / "whole.npz", build_dataset(domain, read_levels(problems).levels).dataset)
    assert out.read_bytes() == (tmp_path / "whole.npz").read_bytes()


def _blocked_signals() -> set[int]:
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


def test_solver_processes_start_with_ctrl_c_held_and_it_reaches_the_builder_afterwards():
    """A Ctrl-C while `sgps dataset` starts its solver processes must neither kill one mid-start (it would
    print a fatal error of its own) nor be lost: the children inherit it held, the builder raises it after."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from sgps.training.methods.hips.dataset import _interrupts_held

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a test runner's worker may ignore it
    try:
        with pytest.raises(KeyboardInterrupt), _interrupts_held():
            signal.raise_signal(signal.SIGINT)  # noted, not raised, inside the block
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
                held_in_child = pool.submit(_blocked_signals).result()
            assert signal.SIGINT in _blocked_signals()
        assert signal.SIGINT in held_in_child
        assert signal.SIGINT not in _blocked_signals()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
