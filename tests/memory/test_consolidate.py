"""`palace consolidate`: merges, promotions to core and fading memories are proposed; nothing is deleted."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from distill_fixtures import write_locomo
from palace_cli.cli import cli
from palace_cli.editing.authoring import init_palace, write_plain_memory
from palace_cli.importers import import_path
from palace_cli.memory.consolidate import consolidate
from palace_cli.memory.distill import distill
from palace_cli.palace import Palace


@pytest.fixture
def distilled(tmp_path):
    """A palace with the fixture conversation distilled, two near-duplicate notes, and a review."""
    root = init_palace(tmp_path / "palace", "Consolidated")
    config = root / "palace.toml"
    config.write_text(config.read_text(encoding="utf-8") + "\n[consolidate]\ncore_sessions = 2\n", encoding="utf-8")
    palace = Palace(root)
    import_path(palace, write_locomo(tmp_path / "conv.json"))
    distill(palace)
    write_plain_memory(palace, "Pepper is fast", "pets", "Ben's dog Pepper is very fast at agility runs.",
                       fields={"about": "Ben"}, valid_from="2023-01-01")
    write_plain_memory(palace, "Pepper runs fast", "pets", "Ben's dog Pepper is fast at agility runs.",
                       fields={"about": "Ben"}, valid_from="2023-03-01")
    write_plain_memory(palace, "Cats sleep a lot", "pets", "Cats sleep sixteen hours a day.", valid_from="2023-01-01")
    (root / "reviews").mkdir(exist_ok=True)
    (root / "reviews" / "test.jsonl").write_text(json.dumps(
        {"v": 1, "id": "cats-sleep-a-lot", "at": "2029-12-01T10:00:00.000Z", "rating": "good", "kind": "cloze",
         "strategy": "due", "learner": "person"}) + "\n", encoding="utf-8")
    return palace


def _files(palace) -> dict[str, bytes]:
    return {str(p.relative_to(palace.root)): p.read_bytes() for p in sorted((palace.root / "memories").rglob("*.md"))}


def test_proposals(distilled):
    before = _files(distilled)
    result = consolidate(distilled, as_of="2030-01-01")
    assert [(m["keep"], m["supersede"]) for m in result.merges] == [("pepper-runs-fast", "pepper-is-fast")]
    assert result.merges[0]["command"] == "palace supersede pepper-is-fast pepper-runs-fast"
    hiking = next(m for m in distilled.index.scan().memories.values() if m.meta.get("turn") == "D1:5")
    assert [(p["id"], p["sessions"]) for p in result.promotions] == [(hiking.id, 2)]
    fading = {f["id"] for f in result.fading}
    assert hiking.id in fading and "pepper-is-fast" in fading
    assert "cats-sleep-a-lot" not in fading  # studied a month before
    nurse = next(m for m in distilled.index.scan().memories.values() if m.meta.get("turn") == "D1:3")
    assert nurse.id not in fading and nurse.id not in {p["id"] for p in result.promotions}  # superseded: left out
    assert _files(distilled) == before
    assert not consolidate(distilled, as_of="2023-09-01").fading


def test_promote_writes_core_only(distilled):
    before = _files(distilled)
    result = consolidate(distilled, as_of="2030-01-01", promote=True)
    [promoted] = result.promoted
    changed = {path for path in before if _files(distilled)[path] != before[path]}
    assert len(changed) == 1
    path = changed.pop()
    old, new = before[path].decode(), _files(distilled)[path].decode()
    assert new.replace("core: true\n", "") == old and distilled.memory(promoted).core
    assert promoted not in {f["id"] for f in consolidate(distilled, as_of="2030-01-01").fading}
    assert not consolidate(distilled, as_of="2030-01-01").promotions


def test_cli_consolidate(distilled):
    runner = CliRunner()
    done = runner.invoke(cli, ["--palace", str(distilled.root), "consolidate", "--as-of", "2030-01-01", "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["counts"] == {"merges": 1, "promotions": 1, "fading": data["counts"]["fading"], "promoted": 0}
    text = runner.invoke(cli, ["--palace", str(distilled.root), "consolidate", "-d", "pets", "--as-of", "2030-01-01"])
    assert text.exit_code == 0 and "palace supersede pepper-is-fast pepper-runs-fast" in text.output
    assert "nothing deleted" in text.output
    bad = runner.invoke(cli, ["--palace", str(distilled.root), "consolidate", "--as-of", "soon"])
    assert bad.exit_code == 2 and "--as-of" in bad.output
