"""Rules of the fifth step of work distill (memory/work.py, cues.py): what a memory says carries the words the turn
said (the project's name, the check after a rollout, the whole report of an event), and what only looks like a
memory is none; each on sentences written for these tests."""

from __future__ import annotations

import pytest

from palace_cli.conversations.model import Session, Turn
from palace_cli.memory.work import project_of, work_units


def _units(*turns, user="Ada", cwd=""):
    session = Session("cc", "claude-code", "x", started="2026-03-02T10:00:00Z", participants=["user", "assistant"])
    session.meta["cwd"] = cwd
    session.turns = [Turn(f"t{i}", role, text) for i, (role, text) in enumerate(turns)]
    return work_units(session, user)


@pytest.mark.parametrize("cwd, project", [("/home/ada/orchard/platform", "orchard"), ("/srv/orchard/api", "orchard"),
                                          ("/home/ada/infra", "infra"), ("/home/ada/src/app", "app"),
                                          ("/home/ada/src/orchard", "orchard"), ("", "")])
def test_a_folder_that_names_a_part_of_a_project_takes_its_parents_name(cwd, project):
    session = Session("cc", "claude-code", "x", started="2026-03-02T10:00:00Z", participants=["user", "assistant"])
    session.meta["cwd"] = cwd
    assert project_of(session) == project
