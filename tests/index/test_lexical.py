"""The lexical index (index/text.py) against BM25 computed by hand: one `text` field, k1 1.2, b 0.5, Robertson's idf,
the body's rest at 0.1, adjacent word pairs at 0.25, a turn's neighbours at half weight."""

from __future__ import annotations

import math

import pytest

from palace_cli.errors import ConfigError
from palace_cli.index.text import (B, K1, NEIGHBOURS, PARTS, Doc, PairAnalyzer, PalaceAnalyzer, TextIndex,
                                   field_weights_of)


def bm25(tf: float, length: float, avg: float, n: int, df: int) -> float:
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))


def doc(note_id: str, subject: str = "", image: str = "", content: str = "", rest: str = "", context: str = "") -> Doc:
    return Doc(f"memories/d/{note_id}.md", note_id, "d", subject, "", "", image, content, rest=rest, context=context)


@pytest.fixture
def index(tmp_path):
    text = TextIndex(tmp_path / "whoosh")
    text.rebuild([doc("a", "lantern harbor", content="walnut"),                   # text: 3 terms
                  doc("b", "orchard", image="lantern lantern", content="quilt"),   # text: 4 terms
                  doc("c", "comet", content="meadow glacier", rest="lantern"),     # text: 3, rest: 1
                  doc("d", "saddle", content="summit")])                           # text: 2
    return text


def test_scores_are_one_field_bm25_with_robertson_idf(index):
    scores = dict(index.search("lantern", limit=10))
    avg = (3 + 4 + 3 + 2) / 4
    assert scores["a"] == pytest.approx(bm25(1, 3, avg, 4, 2), rel=1e-5)
    assert scores["b"] == pytest.approx(bm25(2, 4, avg, 4, 2), rel=1e-5)   # the Image counts as the subject does
    rest_avg = 1 / 4                                                       # one doc of four has a rest of 1 term
    assert scores["c"] == pytest.approx(0.1 * bm25(1, 1, rest_avg, 4, 1), rel=1e-5)
    assert "d" not in scores
    assert [i for i, _ in index.search("lantern", limit=10)] == ["b", "a", "c"]


def test_neighbours_count_half(tmp_path):
    tokens = [(t.text, t.boost) for t in PalaceAnalyzer()(f"kiln pottery\n{NEIGHBOURS}Ana: kiln", mode="index")]
    assert tokens == [("kiln", 1.0), ("potteri", 1.0), ("ana", 0.5), ("kiln", 0.5)]
    text = TextIndex(tmp_path / "whoosh")
    text.rebuild([doc("own", "violin", content="kiln"), doc("near", "violin", content="tulip", context="Ana: kiln")])
    scores = dict(text.search("kiln", limit=10))
    assert scores["own"] > scores["near"] > 0


def test_pairs_join_adjacent_terms_within_a_part(tmp_path):
    value = f"Replication lag\nof the replica{PARTS}lag spikes\n{NEIGHBOURS}Ana: replica lag"
    pairs = [(t.text, t.boost) for t in PairAnalyzer()(value, mode="index")]
    # stopwords drop out before pairing; a newline inside a part does not break a pair, PARTS and NEIGHBOURS do
    assert pairs == [("replic_lag", 1.0), ("lag_replica", 1.0), ("lag_spike", 1.0), ("ana_replica", 0.5),
                     ("replica_lag", 0.5)]
    assert TextIndex(tmp_path / "whoosh").pair_terms("lag of replication lag") == ["lag_replic", "replic_lag"]


def test_a_pair_kept_together_scores_its_weight_in_bm25(tmp_path):
    text = TextIndex(tmp_path / "whoosh")
    # same words, same lengths: only "together" keeps "harbor lantern" adjacent, and no pair spans subject|content
    text.rebuild([doc("together", "harbor lantern", content="quilt walnut"),
                  doc("apart", "harbor quilt", content="lantern walnut"),
                  doc("other", "saddle summit", content="meadow comet")])
    scores = dict(text.search("harbor lantern", limit=10))
    # every doc has two pairs (one per part), and only "together" holds harbor_lantern
    assert scores["together"] - scores["apart"] == pytest.approx(0.25 * bm25(1, 2, 2, 3, 1), rel=1e-5)
    alone = dict(text.search("harbor lantern", limit=10, field_weights={"pairs": 0}))
    assert alone["together"] == pytest.approx(alone["apart"], rel=1e-6)


def test_field_weights_name_the_fields_there_are():
    assert field_weights_of(None) == {"text": 1.0, "rest": 0.1, "pairs": 0.25}
    assert field_weights_of({"rest": 0.3}) == {"text": 1.0, "rest": 0.3, "pairs": 0.25}
    with pytest.raises(ConfigError, match="field_weights names image, subject.*text, rest, pairs"):
        field_weights_of({"subject": 1, "image": 0.2})
