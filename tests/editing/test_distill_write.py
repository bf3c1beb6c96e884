"""write_plain_memory: the one writer of plain memories (distill writes through it; quick capture will too)."""

from __future__ import annotations

import pytest

from palace_cli.core.notefile import load_note
from palace_cli.editing.authoring import write_plain_memory
from palace_cli.errors import PalaceError, UsageError


def test_writes_frontmatter_in_order_and_content(palace):
    memory = write_plain_memory(palace, "Caroline went to a support group", "people",
                                "Caroline went to a LGBTQ support group on 7 May 2023.", type="event",
                                fields={"about": "Caroline", "source": "conversations/locomo/a.md:12", "turn": "D1:3",
                                        "confidence": 0.81}, valid_from="2023-05-07")
    text = (palace.root / memory.path).read_text(encoding="utf-8")
    keys = [line.split(":", 1)[0] for line in text.split("---\n")[1].splitlines()]
    assert keys == ["id", "subject", "type", "about", "source", "turn", "confidence", "valid_from", "created"]
    assert memory.path == "memories/people/caroline-went-to-a-support-group.md"
    assert memory.content == "Caroline went to a LGBTQ support group on 7 May 2023."
    assert memory.valid_from == "2023-05-07" and memory.type == "event"
    assert memory.meta["turn"] == "D1:3" and memory.meta["confidence"] == 0.81
    assert load_note(palace.root, memory.path, "people").subject == "Caroline went to a support group"


def test_a_taken_slug_gets_a_suffix_and_a_taken_id_is_refused(palace):
    first = write_plain_memory(palace, "Jon likes contemporary dance", "people", "Jon likes contemporary dance.")
    second = write_plain_memory(palace, "Jon likes contemporary dance", "people", "Jon loves contemporary dance.")
    assert (first.id, second.id) == ("jon-likes-contemporary-dance", "jon-likes-contemporary-dance-2")
    before = (palace.root / first.path).read_bytes()
    with pytest.raises(PalaceError, match="already exists"):
        write_plain_memory(palace, "Other", "people", "Other.", note_id=first.id)
    assert (palace.root / first.path).read_bytes() == before
    with pytest.raises(UsageError, match="content"):
        write_plain_memory(palace, "Empty", "people", "  ")
    with pytest.raises(UsageError, match="type"):
        write_plain_memory(palace, "Odd", "people", "Odd.", type="gossip")


def test_supersedes_edits_the_old_frontmatter_only(palace):
    old = write_plain_memory(palace, "Jon works as a banker", "people", "Jon works as a banker.",
                             valid_from="2023-01-01")
    body_before = (palace.root / old.path).read_text(encoding="utf-8").split("---\n", 2)[2]
    new = write_plain_memory(palace, "Jon runs a dance studio", "people", "Jon runs a dance studio.",
                             supersedes=[old.id], valid_from="2023-02-01")
    text = (palace.root / old.path).read_text(encoding="utf-8")
    assert text.split("---\n", 2)[2] == body_before
    reread = load_note(palace.root, old.path, "people")
    assert reread.superseded_by == [new.id] and reread.valid_until == "2023-02-01"
    assert new.supersedes == [old.id]
    with pytest.raises(UsageError, match="before"):  # a successor older than what it replaces
        write_plain_memory(palace, "Jon was a student", "people", "Jon was a student.", supersedes=[new.id],
                           valid_from="2022-01-01")


def test_a_given_scan_is_used_and_grows(palace):
    scan = palace.scan(light=True)
    memory = write_plain_memory(palace, "Gina has been to Rome", "people", "Gina has been to Rome once.", scan=scan)
    assert scan.memories[memory.id].path == memory.path
    again = write_plain_memory(palace, "Gina has been to Rome", "people", "Gina went to Rome.", scan=scan)
    assert again.id == "gina-has-been-to-rome-2"
