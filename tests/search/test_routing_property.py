"""Routing never costs recall (issue 16): on generated palaces, whatever the domains and the question, every memory
flat search puts in the top k is in recall's top k, and what recall hands over is a prefix of that top k."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palace_cli.editing.authoring import init_palace
from palace_cli.palace import Palace
from palace_cli.search.retrieve import recall, search

WORDS = ("kiln pottery beagle marathon violin harbor lantern orchard quilt saddle comet meadow glacier bakery "
         "puzzle canoe tulip falcon ledger cactus velvet summit trolley walnut prism garnet hammock").split()
DOMAINS = ("kitchen", "music", "travel", "garden", "workshop")

words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
note = st.fixed_dictionaries({"domain": st.sampled_from(DOMAINS), "subject": words, "anchor": words,
                              "keywords": st.lists(st.sampled_from(WORDS), max_size=3), "image": words,
                              "content": words})
palaces = st.lists(note, min_size=2, max_size=14)
questions = st.lists(words, min_size=1, max_size=4)

NOTE = """---
id: m{number}
subject: {subject}
anchor: {anchor}
keywords: [{keywords}]
verify: token {number} {anchor_word}
---
# {subject}

## Image
{image} token {number} {anchor_word}

## Content
{content}
"""


def write_palace(root: Path, notes: list[dict]) -> Palace:
    palace = Palace(init_palace(root, name="generated"))
    for number, spec in enumerate(notes):
        folder = root / "memories" / spec["domain"]
        folder.mkdir(parents=True, exist_ok=True)
        fields = dict(spec, keywords=", ".join(spec["keywords"]), anchor_word=spec["anchor"].split()[0])
        (folder / f"m{number}.md").write_text(NOTE.format(number=number, **fields))
    palace.refresh()
    return palace


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(notes=palaces, asked=questions, k=st.integers(min_value=1, max_value=5))
def test_recall_never_drops_a_flat_top_k_memory(notes, asked, k):
    with tempfile.TemporaryDirectory() as directory:
        palace = write_palace(Path(directory) / "p", notes)
        assert palace.index.catalog().memory_count == len(notes)
        for question in asked:
            flat = [h.id for h in search(palace, question, k=k, do_refresh=False).ranked]
            untrimmed = recall(palace, question, k=k, trim=False, do_refresh=False)
            assert [h.id for h in untrimmed.ranked[:k]] == flat, question  # routing reorders and drops nothing
            left = {o.id for o in untrimmed.omitted}
            assert [h.id for h in untrimmed.hits] == [i for i in flat if i not in left], question
            trimmed = recall(palace, question, k=k, do_refresh=False)
            handed = [h.id for h in trimmed.hits]
            assert handed == [i for i in flat if i in handed] and (handed or not flat or not trimmed.relevant), question
            assert {r.domain for r in trimmed.route} == {h.domain for h in trimmed.handed}
            assert not trimmed.fallback
