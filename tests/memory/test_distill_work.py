"""Distill of work with a coding agent, on real imports: Claude Code JSONL through `palace import` and through the
hook, a ChatGPT export; the kinds written, what is never a memory, reruns and a kill -9 in the middle."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import REPO
from palace_cli.cli import cli
from palace_cli.conversations.model import Session, Turn
from palace_cli.editing.authoring import init_palace
from palace_cli.importers import import_path
from palace_cli.memory.distill import distill
from palace_cli.memory.extract import extract_session
from palace_cli.palace import Palace

PALACE = str(Path(sys.executable).with_name("palace"))
SESSION = "5e7a0c11-2b9d-4f6e-8a31-9c0d1e2f3a4b"
KEY = "sk-live-51Hx9mQ2eZvKYlo2C8f3XyTq0aBcD7e9"


def _record(kind, uuid, parent, content, ts, **extra):
    record = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/ada/code/clockwork",
              "sessionId": SESSION, "version": "2.0.61", "gitBranch": "main", "type": kind, "uuid": uuid,
              "timestamp": ts, "message": {"role": kind, "content": content}}
    if kind == "assistant":
        record["message"].update({"id": f"msg-{uuid}", "model": "claude-sonnet-4", "type": "message"})
    record.update(extra)
    return record


# (uuid, speaker, text, thinking): the turns of a debugging session; what each should give is in NOISE and KINDS.
TURNS = [
    ("u1", "user", "The clock test fails on CI about one run in five. For context, clockwork is a Django 5.2 app on "
                   "Python 3.12, and the tests run with pytest.", None),
    ("a1", "assistant", "Let me run the test.", "Decision: we move every queue to SQS and drop Celery."),
    ("a2", "assistant", "The test reads the wall clock, so it fails near midnight. I'd freeze time with freezegun in "
                        "every time-dependent test, so the suite no longer depends on the clock.", None),
    ("u2", "user", "yes do that", None),
    ("u3", "user", "Make sure the output is sorted.", None),
    ("u4", "user", "Don't worry about the lint errors for now.", None),
    ("u5", "user", "thanks!", None),
    ("u6", "user", "should we keep the logs for 90 days?", None),
    ("u7", "user", f"here is the staging key: {KEY}, from now on always use it for the smoke tests.", None),
    ("u8", "user", "From now on, no naive datetimes in tests: always timezone.now(), never datetime.now().", None),
    ("u9", "user", "Decision: we keep the audit logs for 13 months, because the auditors sample a whole year.", None),
    ("a3", "assistant", "Summary: the clock test failed because it read the wall clock in the local time zone; "
                        "freezing time with freezegun in the test fixed it, and the suite passes on 50 random "
                        "orderings.", None),
    ("u10", "user", "I always squash merge, it keeps main readable.", None),
    ("u11", "user", "merged. clockwork 2.1 is live in production!", None),
]
NOISE = {"u3", "u4", "u5", "u6", "u7", "a1"}
KINDS = {"u1": "fact", "u2": "decision", "u8": "convention", "u9": "decision", "a3": "solution", "u10": "convention",
         "u11": "milestone"}


def transcript_lines(turns=TURNS) -> list[str]:
    """The session as Claude Code logs it: thinking and tool calls as blocks, a tool result as a user record."""
    lines, parent, minute = [], None, 0
    for uuid, speaker, text, thinking in turns:
        minute += 1
        ts = f"2026-05-04T09:{minute:02d}:00.000Z"
        if speaker == "user":
            lines.append(json.dumps(_record("user", uuid, parent, text, ts)))
            parent = uuid
            continue
        blocks = [{"type": "thinking", "thinking": thinking, "signature": "x"}] if thinking else []
        blocks.append({"type": "text", "text": text})
        blocks.append({"type": "tool_use", "id": f"tool-{uuid}", "name": "Bash", "input": {"command": "pytest -x"}})
        lines.append(json.dumps(_record("assistant", uuid, parent, blocks, ts)))
        lines.append(json.dumps(_record("user", f"{uuid}-r", uuid, [{"type": "tool_result", "tool_use_id":
                                                                      f"tool-{uuid}", "content": "1 failed"}], ts)))
        parent = f"{uuid}-r"
    return lines


def write_transcript(folder: Path, turns=TURNS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{SESSION}.jsonl"
    path.write_text("\n".join(transcript_lines(turns)) + "\n", encoding="utf-8")
    return path


def new_palace(tmp_path: Path, name: str = "Ada") -> Palace:
    root = init_palace(tmp_path / "kb", "Work")
    with (root / "palace.toml").open("a", encoding="utf-8") as handle:
        handle.write(f'\n[identity]\nname = "{name}"\n')
    return Palace(root)


def memories(palace: Palace) -> list:
    palace.refresh(embedder=None)
    return [m for m in palace.index.scan().memories.values() if m.meta.get("turn")]


def files(palace: Palace) -> dict[str, bytes]:
    return {str(p.relative_to(palace.root)): p.read_bytes() for p in sorted((palace.root / "memories").rglob("*.md"))}


def check_session(palace: Palace) -> None:
    """The kinds written, each pointing at its turn; nothing from noise, a thinking block, tool output or a secret."""
    found = memories(palace)
    by_turn = {m.meta["turn"]: m for m in found}
    assert {turn: by_turn[turn].meta["kind"] for turn in KINDS if turn in by_turn} == KINDS
    assert not NOISE & set(by_turn)
    for memory in found:
        path, _, line = memory.meta["source"].rpartition(":")
        header = (palace.root / path).read_text(encoding="utf-8").splitlines()[int(line) - 1]
        assert header.startswith("### ") and header.endswith(f"· {memory.meta['turn']}"), header
        assert memory.meta["confidence"] > 0 and memory.valid_from
        assert "SQS" not in memory.content and "1 failed" not in memory.content and "sk-live" not in memory.content
    assert "freezegun" in by_turn["u2"].content  # the decision is the proposal the user took
    assert by_turn["u10"].meta["about"] == "Ada" and by_turn["u10"].content.startswith("Ada always squash")
    assert by_turn["u1"].meta["about"] == "clockwork" and "Django 5.2" in by_turn["u1"].content
    assert "2026-05-04" in by_turn["u11"].content and "Python 3.12" not in by_turn["u11"].content


def test_claude_code_import_then_distill(tmp_path):
    palace = new_palace(tmp_path)
    import_path(palace, write_transcript(tmp_path / "project"))
    report = distill(palace)
    assert len(report.written) == len(KINDS) and not report.known
    check_session(palace)
    before = files(palace)
    again = distill(palace)
    assert not again.written and not again.known and files(palace) == before  # a rerun writes nothing


def test_the_stop_hook_then_distill(tmp_path):
    palace = new_palace(tmp_path)
    transcript = write_transcript(tmp_path / "project")
    payload = {"session_id": SESSION, "hook_event_name": "Stop", "cwd": str(tmp_path / "project"),
               "transcript_path": str(transcript)}
    done = subprocess.run([PALACE, "hook", "claude-code", "--palace", str(palace.root)], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "imported" in done.stderr, done.stderr
    result = CliRunner().invoke(cli, ["--palace", str(palace.root), "distill", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["counts"]["written"] == len(KINDS)
    check_session(palace)
    subprocess.run([PALACE, "hook", "claude-code", "--palace", str(palace.root)], input=json.dumps(payload),
                   capture_output=True, text=True, timeout=120, check=True)
    again = CliRunner().invoke(cli, ["--palace", str(palace.root), "distill", "--json"])
    assert json.loads(again.output)["counts"] == {"written": 0, "known": 0, "superseded": 0}


def test_a_chatgpt_export_then_distill(tmp_path):
    t = 1778000000.0
    texts = [("user", "For context: tidewater is a REST API in Rust, served by axum on Fly.io."),
             ("assistant", "I'd publish the docs to GitHub Pages from CI on every docs-v* tag, built with mkdocs "
                           "--strict so broken links fail the build."),
             ("user", "yes, do that."),
             ("user", "can you show me the config again?"),
             ("assistant", "Here it is."),
             ("user", "Every endpoint page ends with an Errors table, that's our rule.")]
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": ["m0"]}}
    for i, (role, text) in enumerate(texts):
        mapping[f"m{i}"] = {"id": f"m{i}", "parent": "root" if i == 0 else f"m{i - 1}",
                            "children": [f"m{i + 1}"] if i + 1 < len(texts) else [],
                            "message": {"id": f"m{i}", "author": {"role": role, "metadata": {}}, "create_time": t + i,
                                        "content": {"content_type": "text", "parts": [text]},
                                        "status": "finished_successfully", "metadata": {}, "recipient": "all"}}
    export = tmp_path / "export"
    export.mkdir()
    (export / "conversations.json").write_text(json.dumps([{
        "title": "Docs", "create_time": t, "update_time": t + 9, "mapping": mapping, "current_node": f"m{len(texts) - 1}",
        "conversation_id": "6f1c2d3e-0000-4000-8000-00000000000a", "id": "6f1c2d3e-0000-4000-8000-00000000000a"}]),
        encoding="utf-8")
    palace = new_palace(tmp_path, "Helen")
    result = CliRunner().invoke(cli, ["--palace", str(palace.root), "import", str(export)])
    assert result.exit_code == 0, result.output
    distill(palace)
    by_turn = {m.meta["turn"]: m for m in memories(palace)}
    assert {t: m.meta["kind"] for t, m in by_turn.items()} == {"m0": "fact", "m2": "decision", "m5": "convention"}
    assert "GitHub Pages" in by_turn["m2"].content and "Errors table" in by_turn["m5"].content


def test_thirty_identical_preferences_give_one_memory(tmp_path):
    turns = [t for i in range(30) for t in ((f"u{i}", "user", "I prefer tabs.", None),
                                            (f"a{i}", "assistant", "Noted.", None))]
    palace = new_palace(tmp_path)
    import_path(palace, write_transcript(tmp_path / "project", turns))
    distill(palace)
    assert [m.content for m in memories(palace)] == ["Ada prefers tabs."]
    assert not distill(palace).written


KILLER = """
import os, signal, sys
import palace_cli.core.disk as disk
import palace_cli.editing.writes as writes
from palace_cli.memory.distill import distill
from palace_cli.palace import Palace
where, nth, calls = sys.argv[2], int(sys.argv[3]), []
def killing(original):
    def call(*args, **kwargs):
        calls.append(1)
        if len(calls) == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)
    return call
if where == "link":  # the nth note about to be linked into place: those before it are whole, it and the rest absent
    writes.create_new = killing(writes.create_new)
else:  # the session's notes in temp files beside their names, not yet flushed to the disk
    disk._sync_all = killing(disk._sync_all)
distill(Palace(sys.argv[1]))
print("finished", flush=True)
"""


@pytest.mark.parametrize("where, nth, kept", [("link", 1, 0), ("link", 4, 3), ("sync", 1, 0)])
def test_kill_nine_in_the_middle_and_a_rerun_leave_no_duplicate(tmp_path, where, nth, kept):
    palace = new_palace(tmp_path)
    import_path(palace, write_transcript(tmp_path / "project"))
    child = subprocess.run([sys.executable, "-c", KILLER, str(palace.root), where, str(nth)], capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == -signal.SIGKILL and "finished" not in child.stdout, child.stderr
    assert len(memories(palace)) == kept
    distill(palace)
    found = memories(palace)
    keys = [(m.meta["turn"], m.meta.get("part", 1)) for m in found]
    assert len(keys) == len(set(keys)) == len(KINDS)
    check_session(palace)
    assert not list((palace.root / "memories").rglob("*.tmp"))  # the killed run's temp files are swept


@pytest.mark.parametrize("text", [
    "Don't worry about the lint errors for now.", "Make sure the output is sorted.", "run the tests again please",
    "thanks, looks good!", "should we just turn off pytest-randomly on CI?", "if we ever go multi-region we'd need s3",
    "use single quotes in the lines you touch, for now", "the token is [redacted], from now on always use it",
])
def test_noise_is_never_a_memory(text):
    session = Session("cc", "claude-code", "x", started="2026-05-04T09:00:00Z", participants=["user", "assistant"])
    session.turns = [Turn("a0", "assistant", "I'll read the file first."), Turn("u1", "user", text),
                     Turn("a1", "assistant", "OK.")]
    assert extract_session(session, names={"user": "Ada"})[0] == []


@pytest.mark.parametrize("text, kind", [
    ("Decision: we keep the audit logs for 90 days.", "decision"),
    ("we use ruff, line length 100", "convention"),
    ("I prefer small commits.", "convention"),
    ("from now on every package that starts goroutines has goleak in TestMain", "convention"),
    ("let's go with Pages from CI on docs-v* tags, with --strict so broken links fail the build", "decision"),
    ("PRs always need two approvals before merge.", "convention"),  # a rule in the present: no report of events
    ("Never feed user input into the cache key.", "convention"),
    ("Always seed the random generator in tests.", "convention"),
    ("Never deploy on Fridays, there is nothing urgent enough.", "convention"),
])
def test_what_is_said_outright_is_kept(text, kind):
    session = Session("cc", "claude-code", "x", started="2026-05-04T09:00:00Z", participants=["user", "assistant"])
    session.turns = [Turn("u1", "user", text), Turn("a1", "assistant", "OK.")]
    candidates, _ = extract_session(session, names={"user": "Ada"})
    assert [c.kind for c in candidates] == [kind]


def _work_session(*turns):
    session = Session("cc", "claude-code", "x", started="2026-05-04T09:00:00Z", participants=["user", "assistant"])
    session.turns = [Turn(f"t{i}", role, text) for i, (role, text) in enumerate(turns)]
    return session


def test_a_yes_takes_what_the_agent_said_without_proposal_words():
    from palace_cli.memory.work import work_units

    plan = ("An in-place ALTER rewrites the table under an exclusive lock. The zero-downtime approach:\n"
            "1. add `created_at_tz timestamptz`,\n2. a trigger fills it on insert,\n3. backfill old rows in batches,"
            "\n4. switch reads, then writes, to the new column.")
    units = work_units(_work_session(("assistant", plan), ("user", "ok, do like this. but the backfill only in the "
                                                                   "night, 01:00 to 05:00.")), "Mei")
    assert [u.kind for u in units] == ["decision"]
    assert "Mei agreed" in units[0].text and "trigger" in units[0].text and "01:00 to 05:00" in units[0].text
    facade = "A `PaymentProvider` Protocol with one class per provider, and core.py as a facade picking by region."
    units = work_units(_work_session(("assistant", facade), ("user", "yep go with the protocol.")), "Tom")
    assert [u.kind for u in units] == ["decision"] and "facade" in units[0].text


@pytest.mark.parametrize("proposal, text, words", [
    ("I'd add an alert when connections exceed 80% of max_connections for 5 minutes, paging the on-call.",
     "yes, 80% for 5 min, page on-call. do it", ["max_connections", "80% for 5 min"]),
    ("Proposal: a `PaymentProvider` Protocol, `StripeProvider` and `AdyenProvider`, and core.py as a facade that "
     "picks the provider by customer region.", "yep go with the protocol. one class per provider, core picks by "
                                               "region.", ["AdyenProvider", "one class per provider"]),
])
def test_a_yes_with_the_users_own_details_is_one_decision_in_the_proposals_words(proposal, text, words):
    from palace_cli.memory.work import work_units

    units = work_units(_work_session(("assistant", proposal), ("user", text)), "Rafael")
    assert [u.kind for u in units] == ["decision"] and "Rafael agreed" in units[0].text
    assert all(word in units[0].text for word in words)


def test_a_yes_that_answers_a_question_takes_nothing_of_the_agent():
    from palace_cli.memory.work import work_units

    asked = "Three commits. The heartbeat one is the likely suspect. Can you get a goroutine profile?"
    units = work_units(_work_session(("assistant", asked), ("user", "Yes. rtgw is the websocket gateway.")), "Kenji")
    assert units and all("agreed" not in u.text and "suspect" not in u.text for u in units)
    status = "orderhub 4.2.0 is rolled out on staging, all pods ready, error rate unchanged."
    units = work_units(_work_session(("assistant", status), ("user", "great. commit the chart changes")), "Sam")
    assert all("agreed" not in u.text for u in units)


@pytest.mark.parametrize("text", ["cdc is out.", "Fair. No config then.", "not adding Redis, one process is fine"])
def test_a_rejected_option_on_its_own_is_no_candidate(text):
    from palace_cli.memory.work import work_units

    offer = "I'd make the expiry configurable through a setting, or we could add Redis or CDC for the cache."
    assert work_units(_work_session(("assistant", offer), ("user", text)), "Oliver") == []


def test_a_rule_said_beside_a_one_off_instruction_is_kept_apart():
    from palace_cli.memory.work import work_units

    units = work_units(_work_session(("assistant", "The old index has had no scans in 30 days. Want me to check?"),
                                     ("user", "yes check, but don't drop today, we drop indexes only after one "
                                              "week of observation.")), "Inês")
    assert [u.kind for u in units] == ["convention"] and "today" not in units[0].text


@pytest.mark.parametrize("text", ["we need to migrate shipments.created_at to timestamptz.",
                                  "i want a plan to get rid of the redux store", "API was normal this time."])
def test_what_someone_wants_done_is_no_fact(text):
    from palace_cli.memory.work import work_units

    assert [u.kind for u in work_units(_work_session(("user", text)), "Mei")] == []


@pytest.mark.parametrize("text", ["The memory of rtgw is growing always, after about 6 hours the pod restarts.",
                                  "never touched elixir before honestly."])
def test_always_or_never_in_a_report_is_no_rule(text):
    from palace_cli.memory.work import work_units

    assert all(u.kind != "convention" for u in work_units(_work_session(("user", text)), "Kenji"))


def test_a_check_that_passes_after_the_change_the_agent_made_is_a_solution():
    from palace_cli.memory.work import work_units

    units = work_units(_work_session(
        ("user", "The Gradle build fails on Actions: it can't resolve nexus.internal."),
        ("assistant", "Switched the workflow to `runs-on: harbor-vpc` and re-ran."),
        ("assistant", "Build and image jobs pass on the ARC runners: inside the VPC `nexus.internal` resolves, "
                      "which it couldn't from GitHub-hosted runners.")), "Kwame")
    assert [u.kind for u in units] == ["solution"] and "ARC runners" in units[0].text
    fixes = ("Staging is healthy on 8e41c7a. The two fixes: the chart's probes now use `/actuator/health/readiness`, "
             "and the AnalysisTemplate selects `application`.")
    assert [u.kind for u in work_units(_work_session(("assistant", fixes)), "Sam")] == ["solution"]


def test_what_the_agent_read_is_a_fact_once_the_user_confirms_and_adds_to_it():
    from palace_cli.memory.work import work_units

    read = "I saw the rate limiter: `rate_limit.per_token = 600` per minute with a burst of 100, returning 429."
    units = work_units(_work_session(("assistant", read), ("user", "Yes, that's right, customers ask about it "
                                                                   "constantly. 600 requests per minute per token, "
                                                                   "burst 100.")), "Helen")
    assert [u.kind for u in units] == ["fact"] and "429" in units[0].text and "burst 100" in units[0].text
    assert work_units(_work_session(("assistant", read), ("user", "correct.")), "Helen") == []


@pytest.mark.parametrize("before, text", [
    ("The request filter already puts the principal in a RequestContext; AuditWriter can read the actor there.",
     "fine"),
    ("lumen is a Phoenix app with LiveView and Oban. Want me to go through a request end to end?", "yes please"),
])
def test_an_acknowledgement_or_a_yes_to_an_offer_is_no_decision(before, text):
    from palace_cli.memory.work import work_units

    assert work_units(_work_session(("assistant", before), ("user", text)), "Marcus") == []


def test_every_six_hours_is_a_frequency_not_a_rule():
    from palace_cli.memory.work import work_units

    units = work_units(_work_session(("user", "Because OOM restarts happen every 6 hours, we do hotfix v1.14.3 now, "
                                              "not wait for v1.15.")), "Kenji")
    assert [u.kind for u in units] == ["decision"]


def test_every_thing_must_is_a_rule_said_outright():
    from palace_cli.memory.work import work_units

    units = work_units(_work_session(("user", "And please every payload must have schema_version, this we always "
                                              "forget.")), "Lucía")
    assert [(u.kind, u.signals["strong"]) for u in units] == [("convention", 1.0)]


def test_the_scoring_rule_of_the_agent_session_set():
    from palace_cli.bench.worksessions import Label, LabelledSession, Produced, score

    turns = [{"id": f"t{i}", "speaker": "user", "text": "", "memories": []} for i in range(4)]
    session = LabelledSession("s", "Ada", "/x/p", "2026-01-01", "ops", turns, [
        Label("s", "t1", 1, "m1", "decision", "Shopfront keeps pytest-randomly enabled on CI."),
        Label("s", "t2", 2, "m2", "fact", "Marta owns the checkout tests.")])
    produced = [Produced("s", "t1", "decision", "shopfront: keep pytest-randomly on in CI"),   # 4 of 6 words
                Produced("s", "t1", "decision", "shopfront keeps randomly enabled on CI"),    # 5 of 6: this one matches
                Produced("s", "t3", "convention", "Shopfront keeps pytest-randomly on CI."),  # later: restates m1
                Produced("s", "t2", "fact", "Marta was here.")]                               # half is 2 of 4: no
    result = score(produced, [session])
    assert result["matched"] == ["m1"] and result["restatements"] == 1
    assert result["by_kind"]["decision"]["recall"] == 1.0 and result["by_kind"]["decision"]["precision"] == 0.5
    assert result["by_kind"]["fact"]["recall"] == 0.0 and result["precision"] == round(1 / 3, 4)


def test_a_possessive_or_a_contraction_is_read_whole_by_the_scoring_rule():
    from palace_cli.bench.worksessions import content

    assert content("Harbor's runners keep Gradle’s cache.") == {"harbor", "runners", "keep", "gradle", "cache"}
    assert content("it's the bus's route") == {"bus", "route"}
    assert content("pytest-randomly 5.2, the s3 bucket") == {"pytest", "randomly", "5", "2", "s3", "bucket"}
    assert content("Harbor doesn't deploy on Fridays") == {"harbor", "does", "deploy", "fridays"}


def test_bench_distill_sessions(tmp_path):
    lines = (REPO / "benchmarks" / "agent-sessions.jsonl").read_text(encoding="utf-8")
    subset = tmp_path / "two.jsonl"
    subset.write_text("\n".join(lines.splitlines()[:2]) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["bench", "distill", "--sessions", str(subset), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{"):])
    assert summary["sessions"] == 2 and summary["labels"] == 17
    for part in (summary["cross_validated"], summary["palace"]):
        assert set(part["by_kind"]) == {"decision", "convention", "fact", "solution", "milestone"}
        assert 0 < part["recall"] <= 1 and 0 < part["precision"] <= 1 and part["secrets"] == 0
    assert set(summary["cross_validated"]["folds"]) == {"s01-debug-flaky-login", "s02-debug-goroutine-leak"}
    assert summary["palace"]["distill"]["turns"] == 87
