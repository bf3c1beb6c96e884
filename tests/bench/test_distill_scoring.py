"""The LoCoMo distill rule: which words of an observation a memory must hold (bench/distill.py)."""

from palace_cli.bench.distill import Observation, Scored, score, scored_words
from palace_cli.core.text import content_words


def test_a_possessive_or_a_contraction_leaves_no_word_fragment():
    assert scored_words("Caroline's dog and Melanie’s kids") == content_words("Caroline dog and Melanie kids")
    said = "I'm sure we've said you'll like it, she'd go"
    assert scored_words(said) == content_words("I sure we said you like it, she go")
    assert scored_words("I don't, can't and won't") == content_words("I do not, can not and will not")
    assert "s" in content_words("Caroline's dog")  # what the rule read before: a word `s`


def test_the_s_of_a_possessive_is_no_longer_a_free_match():
    """"That's great, Jon!" shares only Jon with "Jon's studio opened": cut at the apostrophes both held an `s`,
    and two words of four were enough."""
    observation = Observation("c", "Jon", "Jon's studio opened", ("D1:1",))
    memories = [Scored("c", ("D1:1",), "That's great, Jon!"), Scored("c", ("D1:1",), "Jon opened his studio")]
    scored = score(memories, {"c": [observation]})
    assert scored["recall"] == 1.0 and scored["precision"] == 0.5
    assert score(memories[:1], {"c": [observation]})["recall"] == 0.0
