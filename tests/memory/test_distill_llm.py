"""The LLM stage of distill against a local OpenAI-compatible server the test starts: asked, parsed, cached."""

from __future__ import annotations


import pytest

from distill_fixtures import write_locomo
from fake_endpoint import FakeEndpoint, chat_reply, prompt_of
from palace_cli.editing.authoring import init_palace
from palace_cli.errors import UsageError
from palace_cli.importers import import_path
from palace_cli.memory.distill import distill
from palace_cli.memory.llmstage import parse_facts
from palace_cli.palace import Palace

CONGRATS = "Turn (Ben): Wow, that's amazing! Congrats!"
ANSWER = ('Here you go:\n{"type": "event", "fact": "Ben congratulated Ada on her first half marathon."}\n'
          '{"type": "gossip", "fact": "not a type palace knows"}\n{"type": "plan", "fact": ""}\n{broken')


@pytest.fixture
def endpoint():
    """/v1/chat/completions on 127.0.0.1: one fact for the congratulations turn, NONE for any other."""
    server = FakeEndpoint(lambda body: chat_reply(ANSWER if CONGRATS in prompt_of(body) else "NONE"))
    yield server
    server.close()


def _palace(tmp_path, url: str) -> Palace:
    root = init_palace(tmp_path / "llm-palace", "LLM")
    config = root / "palace.toml"
    text = config.read_text(encoding="utf-8").replace(
        "[models]\n", f'[models]\nendpoint = "{url}"\nendpoint_model = "fake"\nembedder = "off"\n')
    config.write_text(text + "\n[distill]\nuncertain = 0.0\n", encoding="utf-8")
    palace = Palace(root)
    import_path(palace, write_locomo(tmp_path / "conv.json"))
    return palace


def test_uncertain_turns_are_asked_once_and_cached(tmp_path, endpoint):
    palace = _palace(tmp_path, endpoint.url)
    first = distill(palace)
    asked = len(endpoint.prompts)
    assert asked == first.llm["asked"] > 0 and first.llm["cached"] == 0 and not first.llm["errors"]
    assert first.llm["memories"] == 1
    [from_llm] = [m for m in first.written if m["turn"].endswith("/D1:4")]
    assert from_llm["content"] == "Ben congratulated Ada on her first half marathon." and from_llm["type"] == "event"
    palace.refresh(embedder=None)
    memory = palace.index.scan().memories[from_llm["id"]]
    assert memory.meta["extracted_by"] == f"llm:fake@{endpoint.url}/v1/chat/completions"
    assert memory.meta["about"] == "Ben" and memory.meta["confidence"] == 0.5
    prompt = next(p for p in endpoint.prompts if CONGRATS in p)
    assert "Date of the conversation: 2023-05-08T13:56" in prompt and "Turn before (Ada):" in prompt
    assert not any("Turn (Ada): I work as a nurse" in p for p in endpoint.prompts)  # kept by the heuristics

    second = distill(palace)
    assert len(endpoint.prompts) == asked  # every answer came from the cache
    assert second.llm["asked"] == second.llm["cached"] == asked - 1 and not second.written
    distill(palace, llm=False)
    assert len(endpoint.prompts) == asked


def test_a_failing_endpoint_stops_the_stage_not_the_run(tmp_path, endpoint):
    endpoint.close()
    palace = _palace(tmp_path, endpoint.url)
    report = distill(palace)
    assert len(report.llm["errors"]) == 1 and "cannot reach" in report.llm["errors"][0]
    assert report.llm["asked"] == 0 and report.written  # the heuristics' memories are written all the same


def test_without_an_endpoint_the_stage_is_off_unless_asked_for(tmp_path):
    root = init_palace(tmp_path / "plain", "Plain")
    config = root / "palace.toml"
    config.write_text(config.read_text(encoding="utf-8").replace("[models]\n", '[models]\ngenerator = "off"\n', 1),
                      encoding="utf-8")
    palace = Palace(root)
    import_path(palace, write_locomo(tmp_path / "conv.json"))
    assert distill(palace, dry_run=True).llm == {}  # a local generator is used only when asked for
    with pytest.raises(UsageError, match="needs a generator"):
        distill(palace, llm=True)


@pytest.mark.parametrize("answer, facts", [
    ("NONE", []),
    ('{"type": "preference", "fact": "Ada loves  hiking."}', [("preference", "Ada loves hiking.")]),
    ('[{"type": "plan", "fact": "Ada plans a trip."}, {"type": "x", "fact": "y"}]', [("plan", "Ada plans a trip.")]),
    ('```json\n{"type": "event", "fact": "Ben adopted Biscuit."}\n```', [("event", "Ben adopted Biscuit.")]),
])
def test_answers_are_parsed_forgivingly(answer, facts):
    assert parse_facts(answer) == facts
