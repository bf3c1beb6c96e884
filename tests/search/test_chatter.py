"""Turns that say little beyond chit-chat rank below the turn that holds the answer.

A turn is ranked by its window of neighbours (index/turns.py), so "Oh wow, that camping trip sounds amazing!" next
to the turn that says where the trip goes scored as high as it, or higher (a short turn's own words weigh more in
BM25). Ranking multiplies a turn's score by how much it says (search/ranking.py, CHATTER).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from palace_cli.core.text import substance
from palace_cli.editing.authoring import init_palace
from palace_cli.importers import import_path
from palace_cli.palace import Palace
from palace_cli.search.retrieve import recall

CHAT = """# Weekend plans
2025-06-02
[18:01] Priya: Hey Sam! How was your week?
[18:02] Sam: Busy but good. Did you sort out the camping trip?
[18:04] Priya: Yes! For the camping trip we booked site 14 at Lake Ouray, July 12 to 14, and rented a canoe.
[18:05] Sam: Oh wow, that camping trip sounds amazing! So happy for you!
[18:07] Priya: Thanks Sam! Can't wait!
[18:09] Sam: My sister just adopted a beagle called Biscuit.
[18:11] Priya: Aww, that's lovely. Say hi to Biscuit!
"""
ANSWER = "site 14 at Lake Ouray"


def _chat_palace(root: Path) -> Palace:
    palace = Palace(init_palace(root, name="Friends"))
    chat = root.parent / "weekend-chat.md"
    chat.write_text(CHAT, encoding="utf-8")
    import_path(palace, chat)
    palace.refresh()
    return palace


def test_substance_counts_what_a_turn_says_beyond_chit_chat():
    assert substance("Thanks Sam! Can't wait!", ["Sam"]) == 0
    assert substance("Oh wow, that camping trip sounds amazing! So happy for you!") <= 2
    said = substance("Yes! For the camping trip we booked site 14 at Lake Ouray, July 12 to 14, and rented a canoe.")
    assert said >= 8  # camping trip booked site ouray july rented canoe, and the numbers
    assert substance("Priya and Sam", ["Priya", "Sam"]) == 0  # the speakers' names say nothing new
    # Scripts the English word lists cannot read are never taken for chatter.
    assert substance("我们订了湖边的十四号营地") >= 5
    assert substance("Мы забронировали место у озера") >= 4


def test_the_turn_that_answers_outranks_the_chit_chat_beside_it_without_vectors(tmp_path):
    result = recall(_chat_palace(tmp_path / "friends"), "Where is Priya's camping trip?")
    assert result.ranked[0].kind == "turn" and ANSWER in result.ranked[0].turn.text, \
        [h.turn.text for h in result.ranked[:3]]


def test_the_turn_that_answers_outranks_the_chit_chat_beside_it_with_vectors(tmp_path, with_models):
    palace = _chat_palace(tmp_path / "friends")
    palace.refresh(vectors="wait")
    result = recall(palace, "camping trip")  # the words of two chit-chat turns and of the answer alike
    assert result.mode == "fused"
    assert ANSWER in result.ranked[0].turn.text, [h.turn.text for h in result.ranked[:3]]
