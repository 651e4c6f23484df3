"""Fixtures: trial records written as runs/<campaign>/trials/<id>/result.json in tmp_path."""

from __future__ import annotations

import pytest
from analysis_fixtures import make_tasks, write_records


@pytest.fixture
def write_run(tmp_path):
    """`write_run(records, campaign="c") -> Path`: the campaign dir holding the records."""
    return lambda records, campaign="c": write_records(tmp_path, records, campaign)


@pytest.fixture
def task_suite(tmp_path):
    """`task_suite(*names) -> Path`: task dirs with a task.toml each."""
    return lambda *names: make_tasks(tmp_path, *names)
