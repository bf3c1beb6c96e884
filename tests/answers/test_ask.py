"""ask: the endpoint backend against a local HTTP server, the response cache, abstention, the real GGUF,
and bench verify wired end to end."""

from __future__ import annotations

import json
import re
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fake_endpoint import FakeEndpoint, chat_reply

import pytest
from click.testing import CliRunner

from palace_cli.answers.abstention import ABSTAIN_BELOW
from palace_cli.answers.ask import abstain_threshold, ask, build_prompt
from palace_cli.backends import Generator, generator_from_config
from palace_cli.backends.openai import OpenAIGenerator, chat_url
from palace_cli.bench.verify import adversarial_answer, detection_metrics, run_verify_bench
from palace_cli.cli import cli
from palace_cli.errors import ConfigError, ModelError
from palace_cli.backends.cache import CachedGenerator, cache_dir, cache_key
from palace_cli.palace import Palace

ANSWERABLE = "How does two-phase commit guarantee atomicity, and why is it a blocking protocol?"
ABSENT = "What is the capital of France and who painted the Mona Lisa?"


class FakeModel:
    """What the test's own OpenAI-compatible server does and what it was asked."""

    def __init__(self):
        # echo: answer and cite the first token in the prompt; empty: cite it, say nothing; plain: no token;
        # error; garbage; slow
        self.mode = "echo"
        self.requests: list[dict] = []
        self.url = ""


def _reply(state: FakeModel, body: dict) -> tuple[int, bytes]:
    prompt = body["messages"][0]["content"]
    if state.mode == "error":
        return 500, json.dumps({"error": {"message": "model exploded"}}).encode()
    if state.mode == "garbage":
        return 200, b"<html>not json</html>"
    if state.mode == "slow":
        time.sleep(2)
    token = re.search(r"(?m)^verify: (.+)$", prompt)
    text = "I do not know."
    if state.mode == "echo" and token:
        text = f"It blocks while the coordinator is down. [verify: {token.group(1)}]"
    if state.mode == "empty" and token:
        text = f"The answer to the question above is: [verify: {token.group(1)}]"
    return chat_reply(text)


@pytest.fixture
def endpoint():
    """An OpenAI-compatible server of our own on 127.0.0.1 (a real HTTP server, canned answers)."""
    state = FakeModel()
    server = FakeEndpoint(lambda body: _reply(state, body))
    state.url, state.requests = server.url, server.requests
    yield state
    server.close()


def _configure(palace_dir, endpoint, extra: str = ""):
    """Point the palace's generator at the test server (and optionally more palace.toml lines)."""
    toml = palace_dir / "palace.toml"
    toml.write_text(toml.read_text(encoding="utf-8")
                    + f'\n[models]\nendpoint = "{endpoint.url}"\nendpoint_model = "fake-1"\n{extra}', encoding="utf-8")


def _run(palace_dir, *args):
    return CliRunner().invoke(cli, ["--palace", str(palace_dir), *args])


# ---- the endpoint backend -------------------------------------------------------------------

@pytest.mark.parametrize("given, url", [
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1/chat/completions"),
    ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1/chat/completions"),
    ("http://localhost:11434/v1", "http://localhost:11434/v1/chat/completions"),
    ("https://h/v1/chat/completions", "https://h/v1/chat/completions"),
])
def test_chat_url(given, url):
    assert chat_url(given) == url


def test_chat_url_rejects_non_http():
    with pytest.raises(ModelError, match="not an http"):
        chat_url("127.0.0.1:8080")


def test_endpoint_posts_a_chat_completion(endpoint, monkeypatch):
    monkeypatch.setenv("PALACE_TEST_KEY", "sk-test")
    generator = OpenAIGenerator(endpoint.url, "fake-1", api_key_env="PALACE_TEST_KEY")
    text = generator.complete("Context\nverify: fig tart\nQuestion?", max_tokens=12, stop=["\n\n"])
    assert text == "It blocks while the coordinator is down. [verify: fig tart]"
    request = endpoint.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "fake-1" and body["max_tokens"] == 12 and body["temperature"] == 0.0
    assert body["messages"] == [{"role": "user", "content": "Context\nverify: fig tart\nQuestion?"}]
    assert body["stop"] == ["\n\n"] and body["stream"] is False
    assert generator.model_id == f"fake-1@{endpoint.url}/v1/chat/completions"


def test_endpoint_errors_are_readable(endpoint):
    generator = OpenAIGenerator(endpoint.url, "fake-1", timeout=0.5)
    endpoint.mode = "error"
    with pytest.raises(ModelError, match="HTTP 500: model exploded"):
        generator.complete("hi")
    endpoint.mode = "garbage"
    with pytest.raises(ModelError, match="not an OpenAI chat-completions answer"):
        generator.complete("hi")
    endpoint.mode = "slow"
    with pytest.raises(ModelError, match="did not answer within 0.5 s"):
        generator.complete("hi")


def test_endpoint_not_running_is_a_clear_error(endpoint):
    port = int(endpoint.url.rsplit(":", 1)[1])
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    free_port = closed.server_address[1]
    closed.server_close()  # nothing listens there now
    assert free_port != port
    with pytest.raises(ModelError, match="cannot reach .* is the server running"):
        OpenAIGenerator(f"http://127.0.0.1:{free_port}", "m", timeout=5).complete("hi")


def test_missing_api_key_variable_is_named(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ModelError, match=r"\$NO_SUCH_KEY_VAR"):
        OpenAIGenerator("http://127.0.0.1:1", "m", api_key_env="NO_SUCH_KEY_VAR")


def test_generator_from_config(endpoint, tmp_path):
    picked = generator_from_config({"endpoint": endpoint.url, "endpoint_model": "fake-1", "endpoint_timeout": 7})
    assert isinstance(picked, OpenAIGenerator) and picked.timeout == 7
    assert generator_from_config({"generator": "none", "endpoint": endpoint.url}) is None
    assert generator_from_config({}) is None  # no model installed in this test's PALACE_HOME
    with pytest.raises(ConfigError, match="endpoint"):
        generator_from_config({"generator": "endpoint"})
    with pytest.raises(ModelError, match="endpoint_model"):
        generator_from_config({"endpoint": endpoint.url})
    with pytest.raises(ModelError, match="no such model file"):
        generator_from_config({"generator": "models/missing.gguf"}, root=tmp_path)


# ---- the response cache ---------------------------------------------------------------------

def test_cache_key_covers_model_prompt_and_parameters():
    base = cache_key("m", "p", {"max_tokens": 8})
    assert base == cache_key("m", "p", {"max_tokens": 8})
    assert len({base, cache_key("m2", "p", {"max_tokens": 8}), cache_key("m", "p2", {"max_tokens": 8}),
                cache_key("m", "p", {"max_tokens": 9})}) == 4


def test_cache_hits_and_bypass(endpoint, tmp_path):
    model = CachedGenerator(OpenAIGenerator(endpoint.url, "fake-1"))
    assert model.directory == cache_dir() and str(cache_dir()).endswith("cache/generations")
    first = model.complete("verify: fig tart", max_tokens=8)
    assert model.complete("verify: fig tart", max_tokens=8) == first
    assert len(endpoint.requests) == 1 and (model.hits, model.misses) == (1, 1) and model.last_cached
    model.complete("verify: fig tart", max_tokens=9)          # other parameters: a miss
    assert len(endpoint.requests) == 2
    endpoint.mode = "plain"
    model.enabled = False                                     # --no-cache asks again and refreshes the entry
    assert model.complete("verify: fig tart", max_tokens=8) == "I do not know."
    assert len(endpoint.requests) == 3 and not model.last_cached
    model.enabled = True
    assert model.complete("verify: fig tart", max_tokens=8) == "I do not know."
    assert len(endpoint.requests) == 3
    entries = list(cache_dir().rglob("*.json"))
    assert len(entries) == 2 and not list(cache_dir().rglob("*.tmp"))
    record = json.loads(entries[0].read_text(encoding="utf-8"))
    assert record["model"] == model.model_id and "response" in record and "prompt" in record


def test_broken_cache_entry_is_a_miss(endpoint):
    model = CachedGenerator(OpenAIGenerator(endpoint.url, "fake-1"))
    model.complete("verify: fig tart")
    (entry,) = cache_dir().rglob("*.json")
    entry.write_text("{truncated", encoding="utf-8")
    assert model.complete("verify: fig tart") == "It blocks while the coordinator is down. [verify: fig tart]"
    assert len(endpoint.requests) == 2


# ---- ask ------------------------------------------------------------------------------------

def test_ask_grounded_answer_then_cache_then_no_cache(example_palace, endpoint):
    _configure(example_palace, endpoint)
    result = _run(example_palace, "ask", ANSWERABLE, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "answered" and data["verdict"]["cited"][0]["id"] == "two-phase-commit"
    assert data["mode"] == "generated" and data["answer"] == "It blocks while the coordinator is down. [verify: mustard-yellow tuxedo]"
    assert data["memories"][0] == {**data["memories"][0], "id": "two-phase-commit", "cited": True}
    assert data["model"].startswith("fake-1@") and data["cached"] is False and data["signal"] == "lexical"
    assert len(endpoint.requests) == 1
    prompt = endpoint.requests[0]["body"]["messages"][0]["content"]
    assert "verify: mustard-yellow tuxedo" in prompt and ANSWERABLE in prompt

    again = json.loads(_run(example_palace, "ask", ANSWERABLE, "--json").stdout)
    assert again["cached"] is True and again["answer"] == data["answer"] and len(endpoint.requests) == 1
    fresh = json.loads(_run(example_palace, "ask", ANSWERABLE, "--json", "--no-cache").stdout)
    assert fresh["cached"] is False and len(endpoint.requests) == 2


def test_an_uncited_generated_answer_gives_way_to_the_extractive_one(example_palace, endpoint):
    _configure(example_palace, endpoint)
    endpoint.mode = "plain"
    result = _run(example_palace, "ask", ANSWERABLE)
    assert result.exit_code == 0, result.output
    assert "extractive answer" in result.output and "hallucination suspected" not in result.output
    assert "I do not know." not in result.output and "the model's answer was not used (uncited" in result.output
    data = json.loads(_run(example_palace, "ask", ANSWERABLE, "--json").stdout)
    assert (data["status"], data["mode"]) == ("answered", "extractive") and len(endpoint.requests) == 1
    assert data["generated"]["answer"] == "I do not know." and data["generated"]["status"] == "uncited"
    assert data["verdict"]["cited"][0]["id"] == "two-phase-commit"
    tokens = {m["id"]: m["verify"] for m in data["memories"]}
    for line, sentence in zip(data["answer"].splitlines(), data["sentences"]):  # each quote carries its unit's token
        assert line == f'"{sentence["text"]}" [verify: {tokens[sentence["id"]]}]'
    assert data["sentences"][0]["id"] == "two-phase-commit" and all(q["found"] for q in data["verdict"]["quotes"])


def test_a_verifying_generated_answer_is_preferred_and_never_skips_the_model(example_palace, endpoint):
    """The choice itself, with a model that always cites (not proof that any real model does)."""
    _configure(example_palace, endpoint)
    data = json.loads(_run(example_palace, "ask", ANSWERABLE, "--json", "--generate", "always").stdout)
    assert data["mode"] == "generated" and data["note"] == "" and "sentences" not in data
    never = json.loads(_run(example_palace, "ask", ANSWERABLE, "--json", "--generate", "never").stdout)
    assert never["mode"] == "extractive" and never["status"] == "answered" and never["note"] == ""
    assert len(endpoint.requests) == 1   # "never" did not call the model


def test_a_cited_answer_that_says_nothing_gives_way_to_the_extractive_one(example_palace, endpoint):
    _configure(example_palace, endpoint)
    endpoint.mode = "empty"
    data = json.loads(_run(example_palace, "ask", ANSWERABLE, "--json").stdout)
    assert (data["status"], data["mode"]) == ("answered", "extractive")
    assert data["generated"]["status"] == "off-topic" and "says nothing about the question" in data["note"]


@pytest.mark.parametrize("text, failed", [
    ("Two-phase commit blocks while the coordinator is down. [verify: fig tart]", None),
    ("The answer to the question above is:\n\n[verify: fig tart]", "off-topic"),
    ("It is a commit protocol. It is a commit protocol. It is a commit protocol. [verify: fig tart]", "loops"),
    ("## Two-Phase Commit\nverify: fig tart", "echo"),
    ("Yes, indeed. [verify: two-phase commit blocking]", "off-topic"),   # words inside a citation do not count
    ("The answer to the question about two-phase commit is: [verify: fig tart]", "restates"),
    ("Two-phase commit is a blocking protocol. [verify: fig tart]", "restates"),
    ("Two-phase commit blocks: participants hold locks until the coordinator decides. [verify: fig tart]", None),
])
def test_not_an_answer(readonly_palace, text, failed):
    from palace_cli.answers.ask import not_an_answer
    from palace_cli.core.text import question_terms

    analyze = readonly_palace.index.text.words
    verdict = not_an_answer(text, question_terms(analyze, ANSWERABLE), analyze)
    assert (verdict[0] if verdict else None) == failed


def test_an_endpoint_that_is_down_costs_the_model_answer_not_the_answer(example_palace, endpoint):
    _configure(example_palace, endpoint)
    endpoint.mode = "error"
    data = json.loads(_run(example_palace, "ask", ANSWERABLE, "--json").stdout)
    assert (data["status"], data["mode"]) == ("answered", "extractive")
    assert data["note"].startswith("the generator failed (") and "model exploded" in data["note"]


def test_ask_abstains_without_calling_the_model(example_palace, endpoint):
    _configure(example_palace, endpoint)
    result = _run(example_palace, "ask", ABSENT, "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["status"] == "abstained" and data["answer"] == "not in this palace"
    assert data["confidence"] < data["threshold"] == ABSTAIN_BELOW["lexical"]
    assert "france" in data["needs"] and "mona" in data["needs"]
    assert data["suggestion"].startswith('palace add "')
    assert endpoint.requests == []
    human = _run(example_palace, "ask", ABSENT)
    assert "not in this palace" in human.output and "it would need a memory about" in human.output


def test_abstain_threshold_from_palace_toml(example_palace, endpoint):
    _configure(example_palace, endpoint, "\n[retrieval]\nabstain_below = {lexical = 0.0, missing = 9}\n")
    palace = Palace(example_palace)
    assert abstain_threshold(palace, "lexical") == 0.0
    assert abstain_threshold(palace, "dense") == ABSTAIN_BELOW["dense"]
    answer = ask(palace, ABSENT)
    assert answer.status != "abstained" and len(endpoint.requests) == 1


@pytest.mark.slow
def test_ask_abstains_on_the_dense_signal_with_the_real_embedder(example_palace, endpoint, with_models):
    _configure(example_palace, endpoint)
    palace = Palace(example_palace)
    absent = ask(palace, ABSENT)
    assert absent.signal == "dense" and absent.status == "abstained" and endpoint.requests == []
    present = ask(palace, ANSWERABLE)
    assert present.signal == "dense" and present.confidence >= ABSTAIN_BELOW["dense"]
    assert present.status == "answered"


def test_prompt_carries_context_question_and_citation_rule():
    prompt = build_prompt("## A (a)\nverify: fig tart\n", "Why?")
    assert prompt.index("verify: fig tart") < prompt.index("Question: Why?") < prompt.index("[verify: token]")
    assert build_prompt("", "Why?").startswith("Question: Why?")


@pytest.mark.slow
def test_ask_with_the_real_small_gguf(palace, real_generator):
    """SmolLM2-135M through llama.cpp when asked to generate anyway: a deterministic answer, verified and cached,
    and whatever it wrote, the answer shown is grounded."""
    first = ask(palace, ANSWERABLE, generator=real_generator, max_tokens=24, threshold=0.0, generate="always",
                use_cache=False)
    assert first.status == "answered" and first.text.strip() and first.mode in ("generated", "extractive")
    assert first.model.startswith("SmolLM2-135M-Instruct") and not first.cached
    assert first.verdict is not None and first.verdict.handed[0] == "two-phase-commit"
    second = ask(palace, ANSWERABLE, generator=real_generator, max_tokens=24, threshold=0.0, generate="always")
    assert second.cached and second.text == first.text
    skipped = ask(palace, ANSWERABLE, generator=real_generator, threshold=0.0)   # auto: too small to ask
    assert skipped.mode == "extractive" and skipped.model == "" and "135M parameters) is too small" in skipped.note


def test_cached_real_generator_is_a_generator(real_generator):
    model = CachedGenerator(real_generator)
    assert isinstance(model, Generator) and model.model_id == real_generator.model_id
    text = model.complete("Say hello.", max_tokens=8)
    assert text and model.complete("Say hello.", max_tokens=8) == text and model.hits == 1


# ---- bench verify ---------------------------------------------------------------------------

@pytest.fixture
def few_queries(example_palace):
    """Eight of the example palace's questions, two of them absent-knowledge: a quick benchmark."""
    lines = (example_palace / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    present = [l for l in lines if '"expected": []' not in l][:6]
    absent = [l for l in lines if '"expected": []' in l][:2]
    path = example_palace / "few.jsonl"
    path.write_text("\n".join(present + absent) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("flagged, ungrounded, expected", [
    ([True, True, False, False], [True, False, False, True], (0.5, 0.5, 0.5, 0.5)),
    ([True, True, True], [True, True, True], (1.0, 1.0, 1.0, 0.0)),
    ([False, False], [True, False], (0.0, 0.0, 0.0, 0.0)),
])
def test_detection_metrics(flagged, ungrounded, expected):
    m = detection_metrics(flagged, ungrounded)
    assert (m["precision"], m["recall"], m["f1"], m["fpr"]) == expected


def test_adversarial_answer_has_subject_and_content_but_not_the_token(readonly_palace):
    memory = readonly_palace.memory("two-phase-commit")
    text = adversarial_answer(memory)
    assert memory.subject in text and "coordinator" in text and f"[verify: {memory.anchor}]" in text
    assert "mustard" not in text.lower()


def test_bench_verify_with_a_model_that_always_cites(example_palace, endpoint, few_queries):
    """A generator that copies the first token of its context: verify should separate it perfectly,
    catching the wrong-context answers as foreign tokens."""
    _configure(example_palace, endpoint)
    summary = run_verify_bench(Palace(example_palace), OpenAIGenerator(endpoint.url, "fake-1"), few_queries, limit=3)
    v = summary["verify"]
    assert v["items"] == 12 and v["grounded"] == 3
    assert (v["overall"]["precision"], v["overall"]["recall"], v["overall"]["fpr"]) == (1.0, 1.0, 0.0)
    assert v["flag_everything"] == {"precision": 0.75, "recall": 1.0, "f1": 0.8571, "fpr": 1.0}
    assert v["behaviour"]["wrong-context"]["foreign_token"] == 1.0
    assert v["behaviour"]["no-context"]["statuses"] == {"uncited": 3}
    assert summary["generated"] == 9
    again = run_verify_bench(Palace(example_palace), OpenAIGenerator(endpoint.url, "fake-1"), few_queries, limit=3)
    assert again["from_cache"] == 9 and len(endpoint.requests) == 9


def test_bench_verify_cli_without_a_generator(readonly_example, few_queries):
    result = _run(readonly_example, "bench", "verify", "--no-generate", "--limit", "2", "--json",
                  "--queries", str(few_queries))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["verify"]["items"] == 2 and data["verify"]["behaviour"]["adversarial"]["flagged"] == 1.0
    table = _run(readonly_example, "bench", "verify", "--no-generate", "--queries", str(few_queries))
    assert "| verify | precision |" in table.output and "abstention" not in table.output


@pytest.mark.parametrize("text, shown", [
    ("A.\n\nB.\n\nA.\n\nB.\n\nA.", "A.\n\nB."),
    ("Answer: yes.\n\n  answer:   YES. \n\nBut why?", "Answer: yes.\n\nBut why?"),
    ("One paragraph only.", "One paragraph only."),
    ("Answer: because retries multiply.\n\nAnswer: because", "Answer: because retries multiply."),
    ("Answer: yes\n\nAnswer: yesterday", "Answer: yes\n\nAnswer: yesterday"),
])
def test_drop_repeats_keeps_first_occurrences(text, shown):
    from palace_cli.answers.ask import drop_repeats

    assert drop_repeats(text) == shown


# ---- the bundled models on example-palace ------------------------------------------------------

def _answerable(example_palace, every: int) -> list[dict]:
    lines = (example_palace / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [q for q in map(json.loads, lines) if q["expected"]][::every]


def _check_grounded(answer, question):
    """An answer `ask` made itself is grounded (or an abstention), never a suspected hallucination."""
    assert answer.status in ("answered", "abstained"), (question["qid"], answer.status, answer.reason, answer.text)
    if answer.status == "abstained":
        return
    assert answer.verdict.grounded and answer.mode in ("generated", "extractive")
    if answer.mode == "extractive":
        tokens = {m["verify"] for m in answer.memories}
        for line in answer.text.splitlines():
            assert any(line.endswith(f"[verify: {token}]") for token in tokens), line


@pytest.mark.slow
def test_the_bundled_smollm2_in_ask_is_grounded_or_abstains(example_palace, with_models):
    """SmolLM2-135M asked to answer (use_generator "always"), on twelve answerable questions of example-palace:
    whatever it writes, ask's answer verifies (its own when it cites, else the quoted sentences)."""
    palace = Palace(example_palace)
    answers = [(q, ask(palace, q["query"], generate="always", max_tokens=64)) for q in _answerable(example_palace, 11)]
    for question, answer in answers:
        _check_grounded(answer, question)
        assert answer.model.startswith("SmolLM2-135M-Instruct") or answer.status == "abstained"
    assert sum(a.status == "answered" for _, a in answers) >= 10
    assert all(a.signal == "dense" for _, a in answers)


@pytest.mark.slow
def test_ask_by_default_quotes_instead_of_asking_the_small_model(example_palace, with_models):
    """use_generator "auto": the 135M model is not asked; every third answerable question is answered
    extractively and verifies, or abstains."""
    palace = Palace(example_palace)
    questions = _answerable(example_palace, 3)
    answers = [ask(palace, q["query"]) for q in questions]
    for question, answer in zip(questions, answers):
        _check_grounded(answer, question)
    answered = [a for a in answers if a.status == "answered"]
    assert len(answered) >= 0.8 * len(answers)
    assert all(a.mode == "extractive" and a.model == "" and "too small to cite" in a.note for a in answered)
    assert all(1 <= len(a.sentences) <= 3 for a in answered)


def test_the_readme_tour_saga_question_is_answered(tmp_path, with_models):
    """The README's fresh palace: one Saga note, asked in other words than it uses (cosine 0.20-0.21, below the
    dense threshold; three of the question's four terms are in the note or its domain)."""
    root = tmp_path / "kb"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    added = _run(root, "add", "Saga", "--domain", "distributed-systems", "--anchor", "relay race of apologies",
                 "--image", "A relay race where each runner who drops the baton must sprint back and hand every "
                 "earlier runner a lemon cake and a signed apology; forty purple sneakers squeak on the track.",
                 "--content", "A saga splits a long transaction into local steps; when a step fails, compensating "
                 "actions undo the steps already committed, in reverse order.",
                 "--keywords", "saga,compensation", "--no-edit")
    assert added.exit_code == 0, added.output
    result = _run(root, "ask", "how do I undo half a distributed transaction?")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("extractive answer")
    assert "compensating actions undo the steps already committed, in reverse order.\" " \
           "[verify: forty purple sneakers squeak]" in result.output
    assert "coverage 0.75 >= 0.75" in result.output and "too small to cite its sources" in result.output
    absent = _run(root, "ask", "What is the capital of France?")
    assert absent.exit_code == 1 and "not in this palace" in absent.output
    assert 'palace add "capital france" --domain DOMAIN' in absent.output
