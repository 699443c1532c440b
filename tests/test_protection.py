"""Archives, comparisons and forks as safe as run folders (docs/robustness.md).

Each case failed before its change: a `RecursionError` traceback for a deeply nested
document, an output written inside an archive or comparison folder, or one made inside
what the command reads.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.errors import ConfigError
from sgps.runs.archive import build_new_folder

DEEP = 100_000


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("sgps: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def levels(tmp_path: Path) -> Path:
    domain = get_domain("tsp")
    path = tmp_path / "t.txt"
    write_levels(path, domain, [domain.generate(seed) for seed in range(10)])
    return path


# 1. Bounded parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[" * DEEP, '{"a":' * DEEP, "[" * 65 + "]" * 65])
def test_a_deeply_nested_archive_index_is_refused_in_one_line(tmp_path: Path, capsys, text: str) -> None:
    archive = tmp_path / "A"
    archive.mkdir()
    (archive / "archive.json").write_text(text)
    assert main(["unpack", str(archive), "--out", str(tmp_path / "X")]) == 2
    assert "archive.json" in one_error(capsys)
    assert not (tmp_path / "X").exists()


@pytest.mark.parametrize("text", ["x = " + "[" * DEEP, "x = " + "[" * 70 + "]" * 70, "a" + ".a" * 100 + " = 1",
                                  "x = " + "{a = " * 70 + "1" + "}" * 70])  # fmt: skip
def test_a_deeply_nested_config_is_refused_in_one_line(tmp_path: Path, levels: Path, capsys, text: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text)
    argv = ["train", "--problems", str(levels), "--out", str(tmp_path / "R"), "--config", str(config), "--quiet"]
    assert main(argv) == 2
    assert "c.toml" in one_error(capsys)
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("params", ["[" * DEEP, "[" * 70 + "]" * 70, '{"a":' * DEEP])
def test_a_deeply_nested_level_header_is_refused_in_one_line(tmp_path: Path, capsys, params: str) -> None:
    file = tmp_path / "l.txt"
    file.write_text(f"; sgps domain=tsp params={params}\n")
    assert main(["show", str(file)]) == 2
    assert "l.txt" in one_error(capsys)


def test_documents_of_ordinary_depth_still_parse() -> None:
    from sgps.fileio import DocumentLimitError, parse_json, parse_toml_text

    assert parse_json("[" * 64 + "]" * 64) is not None
    assert parse_json('["[[[[", {"a": "]]]"}]') == ["[[[[", {"a": "]]]"}]
    assert parse_toml_text('x = "[[[[" # [[[[\ny = [[1], {a = [2]}]\n') == {"x": "[[[[", "y": [[1], {"a": [2]}]}
    with pytest.raises(DocumentLimitError):
        parse_json("[1]", max_bytes=2)


# 2. Signals -------------------------------------------------------------------------------------


def test_sighup_stops_a_run_like_sigterm(tmp_path: Path, levels: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    domain = get_domain("tsp")
    write_levels(levels, domain, [domain.generate(seed) for seed in range(200)])
    run = tmp_path / "R"
    argv = [sys.executable, "-m", "sgps", "train", "--problems", str(levels), "--out", str(run), "--preset", "tiny",
            "--device", "cpu", "--workers", "1"]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (run / "log.txt").exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        child.send_signal(signal.SIGHUP)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 129, err.decode()
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert lines[-1].endswith("sgps: stopped by SIGHUP") and "Traceback" not in err.decode(), err.decode()


# 3. Nothing made inside what it reads -------------------------------------------------------------


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A finished tiny run, its level file and its archive."""
    folder = tmp_path_factory.mktemp("packed")
    domain = get_domain("tsp")
    write_levels(folder / "t.txt", domain, [domain.generate(seed) for seed in range(10)])
    run = folder / "run"
    assert main(["train", "--problems", str(folder / "t.txt"), "--out", str(run), "--preset", "tiny", "--quiet",
                 "--device", "cpu", "--max-iterations", "1"]) == 0  # fmt: skip
    assert main(["pack", str(run), "--out", str(folder / "A"), "--problems", str(folder / "t.txt")]) == 0
    return run, folder / "t.txt", folder / "A"


def test_unpack_into_the_archive_is_refused_through_links_too(packed, tmp_path: Path, capsys) -> None:
    _, _, archive = packed
    link = tmp_path / "link"
    link.symlink_to(archive)
    for out in (archive / "R", link / "R", tmp_path / "x" / ".." / "link" / "R"):
        capsys.readouterr()
        assert main(["unpack", str(archive), "--out", str(out)]) == 2
        assert "inside" in one_error(capsys)
        assert not (archive / "R").exists()


def test_fork_into_the_run_through_a_link_is_refused(packed, tmp_path: Path, capsys) -> None:
    run, _, _ = packed
    link = tmp_path / "link"
    link.symlink_to(run)
    capsys.readouterr()
    assert main(["fork", str(run), "--out", str(link / "F")]) == 2
    assert "inside" in one_error(capsys)
    assert not (run / "F").exists()


def test_pack_over_a_link_to_an_archive_leaves_the_link(packed, tmp_path: Path, capsys) -> None:
    run, problems, archive = packed
    link = tmp_path / "link"
    link.symlink_to(archive)
    capsys.readouterr()
    assert main(["pack", str(run), "--out", str(link), "--problems", str(problems), "--overwrite"]) == 2
    assert "symbolic link" in one_error(capsys)
    assert link.is_symlink() and (archive / "archive.json").is_file()


def test_a_failed_new_folder_is_named_as_the_user_gave_it_not_as_its_temporary_folder(tmp_path):
    """`unpack` and `fork` fill a temporary folder renamed at the end: what goes wrong names `--out`."""
    out = tmp_path / "new"

    def fails_naming_a_file(building: Path) -> None:
        raise ConfigError(f"{building / 'config.toml'}: bad")

    def fails_opening_a_file(building: Path) -> None:
        (building / "missing" / "file").read_text()

    with pytest.raises(ConfigError, match=re.escape(f"{out / 'config.toml'}: bad")):
        build_new_folder(out, fails_naming_a_file, "unpack")
    with pytest.raises(FileNotFoundError) as raised:
        build_new_folder(out, fails_opening_a_file, "fork")
    assert raised.value.filename == str(out / "missing" / "file")
    assert list(tmp_path.iterdir()) == []
