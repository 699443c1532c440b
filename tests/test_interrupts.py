"""Stopping a training run: SIGTERM and Ctrl-C stop it in one line and take its search processes with it;
a search process killed mid-batch is one error line; workers end when their training process is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sgps.domains import get_domain, write_levels

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from /proc")


def levels(path: Path, count: int = 120) -> Path:
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
def test_sigterm_stops_a_run_in_one_line_with_its_workers_and_it_resumes(tmp_path, evaluator):
    process = start_training(tmp_path, "--workers", "2", "--evaluator", evaluator)
    workers = searching_workers(process, tmp_path / "run", 2)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM
    assert err.strip().splitlines() == ["sgps: stopped by SIGTERM"], err
    wait_for(lambda: not any(alive(pid) for pid in workers), 15)
    resumed = subprocess.run([sys.executable, "-m", "sgps", "train", "--problems", str(tmp_path / "t.txt"), "--out",
                              str(tmp_path / "run"), "--resume", "--quiet", "--max-iterations", "1"],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr


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


def test_workers_end_when_their_training_process_is_killed(tmp_path):
    process = start_training(tmp_path, "--workers", "2", "--evaluator", "per-process")
    workers = searching_workers(process, tmp_path / "run", 2)
    process.kill()
    process.communicate(timeout=60)
    wait_for(lambda: not any(alive(pid) for pid in workers), 15)
