"""Extractive answers and abstention evidence: sentence splitting, choosing, citing, suggestions, model size."""

from __future__ import annotations

import pytest

from palace_cli.answers import extract as ex
from palace_cli.answers.abstention import ABSTAIN_BELOW, Evidence, key_terms, thresholds, weigh
from palace_cli.answers.ask import extractive, handed_entries, suggested_domain
from palace_cli.backends import CAPABLE_PARAMETERS, Generator, size_label, unfit_reason, use_generator
from palace_cli.core.text import split_sentences
from palace_cli.errors import ConfigError
from palace_cli.search.retrieve import recall


@pytest.mark.parametrize("text, sentences", [
    ("One. Two! Three? four.", ["One.", "Two!", "Three? four."]),
    ("Tools (e.g. Debezium) read it. Then more.", ["Tools (e.g. Debezium) read it.", "Then more."]),
    ("Use a log (for example the binlog. It works) well. Next.", ["Use a log (for example the binlog. It works) well.",
                                                                  "Next."]),
    ("Compare 2PC vs. Sagas. Done.", ["Compare 2PC vs. Sagas.", "Done."]),
    ("Lock with SELECT ... FOR UPDATE, then commit. Fine.", ["Lock with SELECT ... FOR UPDATE, then commit.", "Fine."]),
    ("Intro line\ncontinues here.\n\n- first item\n- second item. With two\n\n1. numbered", [
        "Intro line continues here.", "first item", "second item.", "With two", "numbered"]),
    ("Costs 2.5 ms. Then 3.", ["Costs 2.5 ms.", "Then 3."]),
    ("", []),
])
def test_split_sentences(text, sentences):
    assert split_sentences(text) == sentences


def test_question_terms_leave_out_the_question_words(readonly_palace):
    terms = ex.question_terms(readonly_palace.index.text.words, "How do I undo half of a distributed transaction?")
    assert terms == ["undo", "half", "distribut", "transact"]


def _sentences(scores, source="a", rank=0):
    unit = ex.Source(source, "memory", rank, "", "", f"{source}.md", 1)
    return [ex.Sentence(unit, i, f"{source}{i}", score) for i, score in enumerate(scores)]


def test_choose_takes_the_best_and_keeps_note_order():
    pool = _sentences([0.1, 0.9, 0.2, 0.8]) + _sentences([0.95], "b", 1)
    assert [s.text for s in ex.choose(pool, 2)] == ["a1", "b0"]
    assert [s.text for s in ex.choose(pool, 3)] == ["a1", "a3", "b0"]
    assert ex.choose([], 2) == []


def test_cover_adds_a_sentence_only_for_terms_still_missing():
    analyze = lambda text: [(w, w) for w in text.split()]  # noqa: E731  a word is its own term
    unit = ex.Source("a", "memory", 0, "", "", "a.md", 1)
    pool = [ex.Sentence(unit, i, text, score) for i, (text, score) in
            enumerate([("kyoto budget cap", 1.0), ("the flights", 0.2), ("offsite in march", 0.1), ("other", 0.3)])]
    idf = {"kyoto": 3.0, "offsite": 2.0, "budget": 1.0}
    chosen = ex.cover(pool, ["kyoto", "offsite", "budget"], analyze, idf)
    assert [s.text for s in chosen] == ["kyoto budget cap", "offsite in march"]   # the second best (0.3) is too far
    assert [s.text for s in ex.cover(pool, ["kyoto", "budget"], analyze, idf)] == ["kyoto budget cap"]
    assert ex.cover([], ["kyoto"], analyze, idf) == []


def test_extract_quotes_the_sentences_that_answer(readonly_palace):
    memory = readonly_palace.memory("retry-backoff-jitter")
    chosen = ex.extract(readonly_palace.index.text, "why do retries need jitter?", [ex.memory_source(memory)])
    assert [s.position for s in chosen] == [2, 3]
    assert chosen[0].text.startswith("Jitter randomises each wait")
    text = ex.compose(chosen)
    assert text.splitlines()[0].startswith('"Jitter randomises each wait')
    assert text.splitlines()[0].endswith('synchronised waves." [verify: a choir of woodpeckers]')
    assert ex.sentence_line(chosen[0].source, chosen[0].text) == 16  # the Content line of the note


def test_rule_all_quotes_every_handed_memory(readonly_palace):
    memories = [ex.memory_source(readonly_palace.memory("retry-backoff-jitter")),
                ex.memory_source(readonly_palace.memory("circuit-breaker"), 1)]
    chosen = ex.extract(readonly_palace.index.text, "why do retries need jitter?", memories, every=True)
    assert {s.memory_id for s in chosen} == {"retry-backoff-jitter", "circuit-breaker"}


def test_a_sentence_holding_another_memorys_token_is_left_out(readonly_palace):
    """Quoting such a sentence would cite a memory that was not handed over (a foreign token)."""
    memory = readonly_palace.memory("retry-backoff-jitter")
    foreign = readonly_palace.memory("two-phase-commit").verify
    memory.content = (f"Jitter matters, unlike the {foreign}. Jitter randomises each retry so clients spread out. "
                      "Full jitter is best for retries.")
    sources = [ex.memory_source(memory)]
    text, verdict, chosen = extractive(readonly_palace, "why do retries need jitter?", sources, handed_entries(sources),
                                       readonly_palace.index.store.tokens())
    assert verdict.grounded and foreign not in text and chosen and all(foreign not in s.text for s in chosen)


def test_untokened_memories_are_not_quoted_while_a_tokened_one_is_handed(readonly_palace):
    plain, tokened = readonly_palace.memory("circuit-breaker"), readonly_palace.memory("retry-backoff-jitter")
    plain.verify = ""
    chosen = ex.extract(readonly_palace.index.text, "retries and breakers", [ex.memory_source(plain),
                                                                    ex.memory_source(tokened, 1)])
    assert {s.memory_id for s in chosen} == {"retry-backoff-jitter"}


# ---- abstention evidence and suggestions -------------------------------------------------------

def test_evidence_is_sure_on_either_signal():
    common = dict(signal="dense", threshold=0.3, coverage_threshold=0.5)
    assert Evidence(confidence=0.31, coverage=0.0, **common).sure
    assert Evidence(confidence=0.1, coverage=0.5, **common).sure
    assert not Evidence(confidence=0.29, coverage=0.49, **common).sure
    assert "confidence 0.29 (dense) < 0.3, coverage 0.49 < 0.5" in Evidence(confidence=0.29, coverage=0.49,
                                                                            **common).describe()


@pytest.mark.parametrize("confidence, coverage, missing, sure", [
    (ABSTAIN_BELOW["dense"], 0.0, [], True), (ABSTAIN_BELOW["dense"] - 0.01, 0.0, [], False),
    (0.0, ABSTAIN_BELOW["coverage"], [], True), (0.0, ABSTAIN_BELOW["coverage"] - 0.01, [], False),
    (0.9, 1.0, ["Kyoto"], False), (0.9, 1.0, [], True),
])
def test_evidence_needs_every_name_and_then_either_signal(confidence, coverage, missing, sure):
    evidence = Evidence("dense", confidence, coverage, ABSTAIN_BELOW["dense"], ABSTAIN_BELOW["coverage"],
                        missing=missing)
    assert evidence.sure is sure
    assert ("missing Kyoto" in evidence.describe()) is bool(missing)


def test_names_and_numbers_are_the_key_terms_that_must_be_quoted(readonly_palace):
    readonly_palace.refresh()
    question = "what was the Kyoto offsite budget in Q3 2025?"
    keys = {k.word: k.strong for k in key_terms(readonly_palace.index.text, question)}
    assert keys == {"Kyoto": True, "offsite": False, "budget": False, "Q3": True, "2025": True}
    first = {k.word: k.strong for k in key_terms(readonly_palace.index.text, "Raft versus Paxos in etcd")}
    assert first == {"Raft": False, "versus": False, "Paxos": True, "etcd": False}  # a first word's capital says nothing


def test_coverage_counts_the_quoted_evidence(readonly_palace):
    question = "what does a coordinator do in two-phase commit across databases?"
    result = recall(readonly_palace, question)
    quoted = ex.extract(readonly_palace.index.text, question, ex.sources_of(result.handed))
    evidence = weigh(readonly_palace, question, result, quoted)
    assert evidence.signal == "lexical" and evidence.coverage > 0.8 and evidence.sure and not evidence.missing
    absent = "What is the capital of France?"
    result = recall(readonly_palace, absent)
    quoted = ex.extract(readonly_palace.index.text, absent, ex.sources_of(result.handed))
    evidence = weigh(readonly_palace, absent, result, quoted)
    assert not evidence.sure and evidence.terms == ["capit", "franc"] and evidence.missing == ["France"]


@pytest.mark.parametrize("setting, expected", [
    (None, (ABSTAIN_BELOW["lexical"], 0.75, 0)),
    ("0.4", (0.4, 0.75, 0)),
    ("{lexical = 0.2, coverage = 0.9}", (0.2, 0.9, 0)),
    ("{dense = 0.2, missing = 1}", (ABSTAIN_BELOW["lexical"], 0.75, 1)),
])
def test_thresholds_from_palace_toml(example_palace, setting, expected):
    from palace_cli.palace import Palace

    if setting is not None:
        toml = example_palace / "palace.toml"
        toml.write_text(toml.read_text() + f"\n[retrieval]\nabstain_below = {setting}\n")
    assert thresholds(Palace(example_palace), "lexical") == expected


def test_a_bad_threshold_is_a_config_error(example_palace):
    from palace_cli.palace import Palace

    toml = example_palace / "palace.toml"
    toml.write_text(toml.read_text() + '\n[retrieval]\nabstain_below = {coverage = "half"}\n')
    with pytest.raises(ConfigError, match="'half' is not a number"):
        thresholds(Palace(example_palace), "dense")


@pytest.mark.parametrize("question, named", [
    ("what is the capital of France?", "DOMAIN"),                     # no domain is named: none is guessed
    ("how do storage engines compact their files?", "storage-engines"),
    ("which Storage Engines keep a write-ahead log?", "storage-engines"),
    ("how does storage work?", "DOMAIN"),                             # half a name is not a name
    ("caching and storage engines for the consensus log", "DOMAIN"),  # two domains named: no choice
])
def test_suggestions_name_a_domain_only_when_the_question_says_it(question, named):
    domains = ["caching-performance", "consensus", "storage-engines"]
    assert suggested_domain(domains, question) == named


# ---- is the generator worth asking -------------------------------------------------------------

class Sized(Generator):
    def __init__(self, parameters):
        self.parameters, self.model_id = parameters, "Tiny-135M.Q4@abc"

    def complete(self, prompt, **kwargs):
        return ""


@pytest.mark.parametrize("parameters, use, fit", [
    (134_515_008, "auto", False), (CAPABLE_PARAMETERS, "auto", True), (None, "auto", True),
    (134_515_008, "always", True), (7_000_000_000, "never", False),
])
def test_unfit_reason(parameters, use, fit):
    reason = unfit_reason(Sized(parameters), {}, use, task="cite its sources")
    assert (reason == "") == fit
    if use == "auto" and not fit:
        assert reason.startswith("Tiny-135M.Q4 (135M parameters) is too small to cite its sources; set [models] "
                                 'endpoint = "http://host:port"')


def test_no_generator_says_how_to_get_one():
    assert "palace models install" in unfit_reason(None, {}) and "endpoint" in unfit_reason(None, {})


@pytest.mark.parametrize("value, use", [(None, "auto"), ("Always", "always"), (False, "never"), (True, "always")])
def test_use_generator_setting(value, use):
    assert use_generator({} if value is None else {"use_generator": value}) == use


def test_a_bad_use_generator_setting_is_a_config_error():
    with pytest.raises(ConfigError, match="use_generator must be one of auto, always, never"):
        use_generator({"use_generator": "sometimes"})


@pytest.mark.parametrize("parameters, label", [(134_515_008, "135M"), (1_500_000_000, "1.5B"), (7e9, "7B")])
def test_size_label(parameters, label):
    assert size_label(int(parameters)) == label


def test_the_real_generator_knows_its_size(real_generator):
    assert 130_000_000 < real_generator.parameters < 140_000_000
