"""The fuzz harness (tests/fuzzing.py) over every class: no traceback, hang, silent accept or unclear refusal.

`python benchmarks/fuzz.py` runs the same classes with more hostile values and prints the
table that docs/robustness.md records.
"""

from __future__ import annotations

import pytest

import fuzzing


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> fuzzing.Workspace:
    return fuzzing.make_workspace(tmp_path_factory.mktemp("fuzz"))


def test_every_path_option_of_the_command_line_is_classified():
    """A new path option must be named an output (with hostile cases) or an input before it ships."""
    assert fuzzing.unclassified_path_options() == []


@pytest.mark.parametrize("make", [fuzzing.output_path_cases, fuzzing.option_cases, fuzzing.api_cases,
                                  fuzzing.damaged_run_cases, fuzzing.damaged_journal_cases,
                                  fuzzing.damaged_dataset_cases, fuzzing.made_folder_cases,
                                  fuzzing.nested_document_cases, fuzzing.damaged_archive_cases],
                         ids=lambda make: make.__name__)  # fmt: skip
def test_no_case_of_the_class_is_a_defect(space, make):
    cases = make(space)
    assert cases
    fuzzing.run_cases(cases, space.root)
    defects = [f"{case.name}: {case.defect} ({case.message})" for case in cases if case.defect]
    assert defects == [], "\n".join(defects)
