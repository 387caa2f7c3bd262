"""The project's files on the person's message (`agent.project`, issue 32)."""

from __future__ import annotations

import pytest

from gbr_node.agent.project import HEADING, project_note
from gbr_node.agent.tokens import text_tokens


def test_every_file_is_listed_one_per_line_when_it_fits() -> None:
    note = project_note(["config.ini", "server.py", "src/app.py"], 200)
    assert note == f"{HEADING} (3):\nconfig.ini\nserver.py\nsrc/app.py\n]"


@pytest.mark.parametrize("budget", [40, 60, 120, 400])
def test_a_long_listing_stops_within_its_budget_and_counts_the_rest(budget: int) -> None:
    paths = [f"pkg/module_{n:03}.py" for n in range(300)]
    note = project_note(paths, budget)
    assert text_tokens(note) <= budget
    listed = note.splitlines()[1:-1]
    assert listed == paths[: len(listed)] and listed
    assert note.endswith(f"... and {300 - len(listed)} more; use list_dir]")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ([], f"{HEADING}: none, the folder is empty]"),
        (None, f"{HEADING}: too many to list here; use list_dir]"),
    ],
)
def test_an_empty_or_too_large_project_gets_one_line(files, expected: str) -> None:
    assert project_note(files, 100) == expected


@pytest.mark.parametrize("files", [["a.py"], [], None])
def test_no_room_no_note(files) -> None:
    assert project_note(files, 3) == ""
