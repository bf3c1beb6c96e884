"""Check a palace: notes that cannot be read, missing fields, broken links, token problems, stale indices."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import PalaceError
from .index.files import check_index_files, write_index_files
from .notes import Memory, body_link_lines
from .palace import Palace, Problem, Scan
from .quiz.reviewlog import ReviewLog
from .smashin import weak_image_problems
from .tokens import PhraseIndex, phrase_key, run_keys, token_problems

# Parser findings that make a note wrong rather than odd; everything else the parser notes is a warning.
ERROR_CODES = {"missing-field", "bad-type", "duplicate-key", "conflict-marker"}
TOKEN_WARNINGS = {"token-guessable"}
PUBLIC_FIELDS = ("subject", "anchor", "keywords", "aliases", "id")


@dataclass
class LintReport:
    """Problems found, and what `--fix` changed."""

    problems: list[Problem]
    fixed: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(p.severity == "error" for p in self.problems)

    @property
    def warnings(self) -> int:
        return sum(p.severity == "warning" for p in self.problems)

    def failed(self, strict: bool = False) -> bool:
        """True when lint should exit 1: any error, or with strict any warning too."""
        return bool(self.errors or (strict and self.warnings))

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"problems": [p.as_dict() for p in self.problems], "errors": self.errors,
                "warnings": self.warnings, "fixed": self.fixed}


def _field_text(memory: Memory, name: str) -> str:
    value = getattr(memory, name)
    return ", ".join(value) if isinstance(value, list) else value


def _link_problems(memory: Memory, known: dict) -> list[Problem]:
    problems = []
    for link in memory.links:
        if link not in known:
            problems.append(Problem(memory.path, memory.field_line("links"), "error", "broken-link",
                                    f"link to unknown memory {link!r}"))
    reported = set(memory.links)
    for link, line in body_link_lines(memory.body, memory.body_line or memory.line):
        if link not in known and link not in reported:
            reported.add(link)
            problems.append(Problem(memory.path, line, "error", "broken-link", f"link to unknown memory {link!r}"))
    return problems


def _exposures(memory: Memory, secrets: PhraseIndex) -> tuple[list[Problem], bool]:
    """A verify token (this memory's or another's) printed in a field that index files and results show;
    and whether the memory's own token is one of them."""
    problems, own = [], False
    for name in PUBLIC_FIELDS:
        for owner in sorted(secrets.owners_in(_field_text(memory, name))):
            own = own or owner == memory.id
            whose = "its verify token" if owner == memory.id else f"the verify token of {owner}"
            problems.append(Problem(memory.path, memory.field_line(name), "error", "token-exposed",
                                    f"the {name} contains {whose}; index files and search results show the "
                                    f"{name}, so the token would prove nothing"))
    return problems, own


def note_problems(scan: Scan) -> list[Problem]:
    """Per-memory problems: warnings from parsing, broken links, verify tokens."""
    problems = []
    memories = sorted(scan.memories.values(), key=lambda m: m.path)
    owners: dict[str, list[str]] = {}
    for memory in memories:
        if memory.verify:
            owners.setdefault(phrase_key(memory.verify), []).append(memory.id)
    secrets = PhraseIndex({m.id: m.verify for m in memories if m.verify})
    for memory in memories:
        for warning in memory.warnings:
            severity = "error" if warning.code in ERROR_CODES else "warning"
            problems.append(Problem(memory.path, warning.line, severity, warning.code, warning.message))
        problems += _link_problems(memory, scan.memories)
        key = phrase_key(memory.verify)
        others = {i: scan.memories[i].verify for i in owners.get(key, []) if i != memory.id}
        exposed, own_exposed = _exposures(memory, secrets)
        line = memory.field_line("verify")
        for code, message in token_problems(memory.verify, memory.image, memory.subject, memory.keywords,
                                            memory.content, others):
            if code == "token-guessable" and own_exposed:
                continue  # token-exposed says it more strongly
            fixable = code == "token-missing" and bool(memory.image)
            severity = "warning" if code in TOKEN_WARNINGS else "error"
            problems.append(Problem(memory.path, line, severity, code, message, fixable=fixable))
        if memory.verify:
            inner = sorted({i for run in run_keys(memory.verify) - {key} for i in owners.get(run, [])} - {memory.id})
            for other in inner:
                problems.append(Problem(memory.path, line, "error", "token-overlap",
                                        f"verify token contains the verify token of {other}; citing one would "
                                        "look like citing both"))
        problems += exposed
    return problems


def config_problems(palace: Palace, scan: Scan) -> list[Problem]:
    """palace.toml text that the root index prints and that contains a verify token."""
    secrets = PhraseIndex({m.id: m.verify for m in scan.memories.values() if m.verify})
    texts = [("name", palace.config.name), ("identity", palace.config.identity)]
    for name, spec in sorted(palace.config.domains.items()):
        texts += [(f"[domains.{name}] description", spec.description),
                  (f"[domains.{name}] aliases", ", ".join(spec.aliases))]
    problems = []
    for where, text in texts:
        problems += [Problem("palace.toml", None, "error", "token-exposed",
                             f"{where} contains the verify token of {owner}; INDEX.md would show it")
                     for owner in sorted(secrets.owners_in(text))]
    return problems


def propose_missing_tokens(palace: Palace, scan: Scan) -> tuple[list[str], list[Problem]]:
    """Write a proposed verify token into every note that has an Image but no token; returns what changed,
    and a problem for each note that could not be updated (one such note never stops the others)."""
    from .authoring import propose_missing_token

    fixed, failed = [], []
    taken = {m.verify for m in scan.memories.values() if m.verify}
    for memory in sorted(scan.memories.values(), key=lambda m: m.path):
        try:
            if propose_missing_token(palace, memory, taken) is not memory:
                fixed.append(f"{memory.path}: proposed a verify token")
        except (PalaceError, OSError) as exc:  # a bare-CR note, a frontmatter it cannot edit exactly, a read-only file
            reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
            failed.append(Problem(memory.path, memory.field_line("verify"), "warning", "not-fixed",
                                  f"could not write the proposed verify token: {reason}"))
    return fixed, failed


def stray_notes(palace: Palace) -> list[Problem]:
    """Note-like files outside memories/, except session files (their frontmatter has an `id` too)."""
    from .conversations import CONVERSATIONS

    return [p for p in palace.stray_notes() if not p.path.startswith(CONVERSATIONS + "/")]


def conversation_problems(palace: Palace) -> list[Problem]:
    """What cannot be read in session files under conversations/, and session ids used twice."""
    from .conversations import load_session, session_files

    problems, ids, skipped = [], {}, []
    files = session_files(palace.root, skipped)
    problems += [Problem(path, None, "error", code, message) for path, code, message in skipped]
    for relpath, _, _ in files:
        session = load_session(palace.root, relpath)
        for found in session.problems:
            problems.append(Problem(found.path, found.line, "error", "session-unreadable", found.message))
        if session.id in ids:
            problems.append(Problem(relpath, 2, "error", "duplicate-session-id",
                                    f"session id {session.id!r} is already used by {ids[session.id]}"))
        ids.setdefault(session.id, relpath)
    return problems


def _notes(palace: Palace) -> Scan:
    """The refreshed note cache, without regenerating the index files: lint reports them, only --fix writes."""
    palace.refresh(embedder=None, index_files=False)
    return palace.index.scan()


def lint(palace: Palace, fix: bool = False) -> LintReport:
    """Every problem in the palace; with fix, propose missing tokens and regenerate index files (nothing else)."""
    fixed: list[str] = []
    not_fixed: list[Problem] = []
    scan = _notes(palace)
    if fix:
        fixed, not_fixed = propose_missing_tokens(palace, scan)
        if fixed:
            scan = _notes(palace)
        report = write_index_files(palace, scan)
        fixed += [f"{path}: regenerated" for path in report.written]
        fixed += [f"{path}: removed (no such domain)" for path in report.removed]
    problems = list(scan.problems) + note_problems(scan) + config_problems(palace, scan) + stray_notes(palace)
    problems += conversation_problems(palace) + not_fixed + ReviewLog(palace).read().problems
    problems += weak_image_problems(scan, palace.config.raw.get("study"))
    for relpath in check_index_files(palace, scan):
        problems.append(Problem(relpath, None, "error", "stale-index",
                                "generated index file is out of date; run `palace index`", fixable=True))
    problems.sort(key=lambda p: (p.path, p.line or 0, p.code, p.message))
    return LintReport(problems, fixed)
