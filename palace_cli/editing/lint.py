"""Check a palace: notes that cannot be read, missing fields, broken links, token problems, stale indices."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from palace_cli.core.dates import NEVER, parse_moment
from palace_cli.core.layout import REVIEWS, NoteRules, Problem, Scan
from palace_cli.core.links import note_links, property_targets
from palace_cli.core.names import Files, Names
from palace_cli.core.walk import attachment_files
from palace_cli.core.notefile import parse_note
from palace_cli.core.notes import VERSION_FIELDS, Memory
from palace_cli.core.tokens import PhraseIndex, phrase_key, run_keys, token_problems
from palace_cli.core.validity import Versions
from palace_cli.errors import Ambiguous, NoteError, PalaceError
from palace_cli.index.files import check_index_files
from palace_cli.palace import Palace
from palace_cli.editing.reviewlog import ReviewLog
from palace_cli.core.smashin import weak_image_problems

# Parser findings that make a note wrong rather than odd; everything else the parser notes is a warning (a
# memory that merely lacks a SMASHIN part, like its anchor, is not broken: `lint --study` lists what it lacks).
ERROR_CODES = {"bad-type", "bad-id", "duplicate-key", "conflict-marker", "bad-date"}
TOKEN_WARNINGS = {"token-guessable", "token-missing"}
# What the parser says about palace's template (an anchor, the sections, a palace type): only for notes that opted
# into it (NoteRules.templated); a note of the person's own shape is checked for its links and structure only.
TEMPLATE_CODES = {"missing-field", "missing-section", "placeholder-section", "unknown-type"}
OPT_IN = ("add `verify:` to its frontmatter (or a glob to [notes] template in palace.toml) to opt it into palace's "
          "template")
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


def _link_problem(memory: Memory, link: str, line: int, names: Names) -> Problem | None:
    """A link that names no memory (broken) or several (ambiguous), by the resolver every command uses."""
    try:
        found = names.resolve(link, source=memory.path)
        if found is not None and found.shared and found.memory.path != memory.path:
            here = posixpath.dirname(found.memory.path) == posixpath.dirname(memory.path)
            rule = "the note in the linking note's folder wins" if here else "the shortest path wins"
            return Problem(memory.path, line, "warning", "shared-name",
                           f"link {link!r} names {found.memory.path}: other notes share its name "
                           f"({', '.join(found.shared[:3])}{', ...' if len(found.shared) > 3 else ''}) and {rule} "
                           "(Obsidian's rule); write the folder too to name another")
        if found is not None:
            return None
    except Ambiguous as exc:
        return Problem(memory.path, line, "error", "ambiguous-link",
                       f"link {link!r} names several memories ({', '.join(exc.candidates)}); link by id")
    return Problem(memory.path, line, "error", "broken-link", f"link to unknown memory {link!r}")


def _links_with_lines(memory: Memory) -> list[tuple[str, int, bool, bool, bool]]:
    """Every link of a note once, with the file line it is on, whether it names a file that is not a note,
    whether it is a wikilink (a file is looked for anywhere) and whether it names a meta page (`[[^Name]]`):
    frontmatter `links`, property links, body links."""
    found = [(link, memory.field_line("links"), False, True, False) for link in memory.links]
    found += [(target, memory.field_line(key), file, True, False)
              for key, target, file in property_targets(memory.meta)]
    for link in note_links(memory.body, memory.body_line or memory.line, files=True):
        name = link.name(memory.path)
        if not name.startswith("../"):  # out of the palace: no note
            found.append((name, link.line, link.file, link.form in ("wiki", "embed"), link.meta))
    reported: set[str] = set()
    unique = []
    for item in found:
        if item[0] not in reported:
            reported.add(item[0])
            unique.append(item)
    return unique


def _link_problems(memory: Memory, names: Names, files: Files | None = None) -> list[Problem]:
    """Links that name nothing, or several notes; a link to a file (`![[photo.jpg]]`) is checked against the
    vault's files when they are given (a note of the name comes first, as in Obsidian). A meta page link
    (`[[^Library/Std]]`) to no note is no broken link: SilverBullet serves such pages from libraries that need
    not be in the vault (its standard library is built in), and the caret says the writer meant one."""
    found = []
    for link, line, file, wiki, meta in _links_with_lines(memory):
        problem = None if file else _link_problem(memory, link, line, names)
        if meta and problem is not None and problem.code == "broken-link":
            continue
        if (file or (problem is not None and problem.code == "broken-link")) and files is not None:
            if files.resolve(link, memory.path, anywhere=wiki) is not None:
                continue  # a file of the vault
            if file:
                problem = Problem(memory.path, line, "warning", "missing-file",
                                  f"link to a file that is not in the vault {link!r}")
        if problem is not None:
            found.append(problem)
    return found


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


def note_problems(scan: Scan, rules: NoteRules | None = None, files: Files | None = None) -> list[Problem]:
    """Per-memory problems: warnings from parsing, broken links (to files too, when `files` holds the vault's
    other files), verify tokens (of the notes `rules` call templated)."""
    checker = NoteChecker(scan.memories, rules, files)
    return [p for memory in sorted(scan.memories.values(), key=lambda m: m.path) for p in checker.problems(memory)]


class NoteChecker:
    """What checking one memory needs from the rest of the palace (its ids and verify tokens), gathered once;
    light memories (`Palace.scan(light=True)`) are enough."""

    def __init__(self, memories: dict[str, Memory], rules: NoteRules | None = None, files: Files | None = None):
        self.memories = memories
        self.rules = rules or NoteRules()
        self.files = files  # the vault's files that are not notes: what attachment links name (None: unchecked)
        self.owners: dict[str, list[str]] = {}
        for memory in sorted(memories.values(), key=lambda m: m.path):
            if memory.verify:
                self.owners.setdefault(phrase_key(memory.verify), []).append(memory.id)
        self.secrets = PhraseIndex({m.id: m.verify for m in memories.values() if m.verify})
        self._variant: tuple[tuple, NoteChecker] | None = None
        self._versions: dict[str, set[str]] | None = None
        self._names: Names | None = None

    @property
    def names(self) -> Names:
        """The names links resolve by (ids, paths, file names, aliases, former ids, subjects), built on first use."""
        if self._names is None:
            self._names = Names(self.memories.values())
        return self._names

    def family(self, memory: Memory) -> dict[str, Memory]:
        """The memory and every memory joined to it by supersedes / superseded_by links, either way, however
        far: all that the version checks of this one memory look at."""
        if self._versions is None:
            self._versions = {}
            for other in self.memories.values():
                for name in VERSION_FIELDS:
                    for linked in getattr(other, name):
                        self._versions.setdefault(other.id, set()).add(linked)
                        self._versions.setdefault(linked, set()).add(other.id)
        found = {memory.id: memory}
        todo = [*memory.supersedes, *memory.superseded_by, *self._versions.get(memory.id, ())]
        while todo:
            note_id = todo.pop()
            if note_id in found or note_id not in self.memories:
                continue
            found[note_id] = self.memories[note_id]
            todo += self._versions.get(note_id, ())
        return found

    def with_memory(self, memory: Memory) -> NoteChecker:
        """A checker that knows this version of the memory (an unsaved edit); self when nothing it uses changed."""
        known = self.memories.get(memory.id)
        if known is not None and known.verify == memory.verify and known.path == memory.path:
            return self
        key = (memory.id, memory.path, memory.verify)
        if self._variant is None or self._variant[0] != key:  # one kept: the note being edited
            self._variant = (key, NoteChecker({**self.memories, memory.id: memory}, self.rules, self.files))
        return self._variant[1]

    def problems(self, memory: Memory, rules: NoteRules | None = None) -> list[Problem]:
        """Warnings from parsing, broken links and verify-token problems of one memory (the template's only when it
        opted into it: `rules`, else the checker's, say)."""
        problems = []
        templated = (rules or self.rules).templated(memory)
        for warning in memory.warnings:
            if warning.code in TEMPLATE_CODES and not templated:
                continue
            severity = "error" if warning.code in ERROR_CODES else "warning"
            problems.append(Problem(memory.path, warning.line, severity, warning.code, warning.message))
        problems += _link_problems(memory, self.names, self.files)
        if memory.plain or not templated:
            return problems  # no token to check, or a note of the person's own: its links and structure only
        key = phrase_key(memory.verify)
        others = {i: self.memories[i].verify for i in self.owners.get(key, []) if i != memory.id}
        exposed, own_exposed = _exposures(memory, self.secrets)
        line = memory.field_line("verify")
        for code, message in token_problems(memory.verify, memory.image, memory.subject, memory.keywords,
                                            memory.content, others):
            if code == "token-guessable" and own_exposed:
                continue  # token-exposed says it more strongly
            fixable = code == "token-missing" and bool(memory.image)
            severity = "warning" if code in TOKEN_WARNINGS else "error"
            problems.append(Problem(memory.path, line, severity, code, message, fixable=fixable))
        if memory.verify:
            inner = sorted({i for run in run_keys(memory.verify) - {key} for i in self.owners.get(run, [])}
                           - {memory.id})
            for other in inner:
                problems.append(Problem(memory.path, line, "error", "token-overlap",
                                        f"verify token contains the verify token of {other}; citing one would "
                                        "look like citing both"))
        problems += exposed
        return problems


def edited_memory(palace: Palace, relpath: str, text: str) -> Memory:
    """The memory a note's unsaved text holds, read at relpath in the palace's domain for it (the index's rule,
    `Palace.domain_of`); NoteError when it cannot be read."""
    return parse_note(text.replace("\r\n", "\n").replace("\r", "\n"), relpath, palace.domain_of(relpath))


def lint_note_text(palace: Palace, relpath: str, text: str, checker: NoteChecker | None = None) -> list[Problem]:
    """Lint's problems for one note as an editor holds it (unsaved text) against the rest of the palace.

    `relpath` is where the note is (or will be saved); pass a `NoteChecker` built
    once from the palace's light scan to keep repeated calls cheap.
    """
    try:
        memory = edited_memory(palace, relpath, text)
    except NoteError as exc:
        return [Problem(relpath, exc.line, "error", "unreadable-note", exc.reason)]
    if checker is None:
        checker = NoteChecker(palace.scan(light=True).memories)
    owner = checker.memories.get(memory.id)
    problems = []
    if owner is not None and owner.path != relpath:
        problems.append(Problem(relpath, memory.field_line("id"), "error", "duplicate-id",
                                f"id {memory.id!r} is already used by {owner.path}"))
    rules = palace.site.rules
    problems += checker.with_memory(memory).problems(memory, rules)
    problems += [p for p in version_problems(Scan(memories=checker.family(memory))) if p.path == relpath]
    problems += weak_image_problems(templated_only(Scan(memories={memory.id: memory}), rules),
                                    palace.config.raw.get("study"))
    return sorted(problems, key=lambda p: (p.line or 0, p.code, p.message))


def _moment(text: str):
    try:
        return parse_moment(text)
    except ValueError:
        return None  # reported as bad-date when the note was read


def version_problems(scan: Scan) -> list[Problem]:
    """Version links and validity: unknown ids, cycles, one-sided links, forks, ranges that end before they start."""
    memories = scan.memories
    versions = Versions.of(memories.values())
    problems = []
    for memory in sorted(memories.values(), key=lambda m: m.path):
        for name in VERSION_FIELDS:
            for other in getattr(memory, name):
                if other not in memories:
                    problems.append(Problem(memory.path, memory.field_line(name), "error", "broken-link",
                                            f"`{name}` names unknown memory {other!r}"))
        start, end = _moment(memory.valid_from), _moment(memory.valid_until)
        if start is not None and end is not None and end < start:
            problems.append(Problem(memory.path, memory.field_line("valid_until"), "error", "valid-range",
                                    f"valid_until {memory.valid_until} is before valid_from {memory.valid_from}"))
        if memory.id in versions.successors and versions.end(memory.id) == NEVER:
            problems.append(Problem(memory.path, memory.field_line("superseded_by"), "warning", "undated-supersede",
                                    "superseded, but neither this note's valid_until nor a successor's valid_from or "
                                    "created says when; it counts as superseded at every date (set valid_until)"))
    for cycle in versions.cycles():
        where = next((memories[i] for i in cycle if i in memories), None)
        if where is not None:
            problems.append(Problem(where.path, where.field_line("supersedes"), "error", "supersede-cycle",
                                    f"supersede links go round in a circle: {', '.join(cycle)}; "
                                    "a version cannot come after itself"))
    for old, new, lacking in versions.one_sided():
        memory = memories[lacking]
        name = "superseded_by" if lacking == old else "supersedes"
        problems.append(Problem(memory.path, memory.field_line(name), "warning", "one-sided-supersede",
                                f"{new} supersedes {old}, but {lacking}'s `{name}` does not say so; "
                                f"`palace supersede {old} {new}` writes the missing side"))
    for old, current in versions.forks():
        if old in memories:
            problems.append(Problem(memories[old].path, memories[old].field_line("superseded_by"), "warning",
                                    "forked-versions",
                                    f"{old} is superseded by {len(current)} memories that are all current "
                                    f"({', '.join(current)}); if one replaced the other, `palace supersede "
                                    f"{current[0]} {current[1]}`"))
    return problems


def core_problems(palace: Palace, scan: Scan) -> list[Problem]:
    """Core memories that wake-up's default budget has no room for, even on their own."""
    from palace_cli.search.wakeup import DEFAULT_BUDGET, core_overflow

    left, needed = core_overflow(palace, scan)
    return [Problem(memory.path, memory.field_line("core"), "warning", "core-overflow",
                    f"core memories alone need about {needed} tokens, over wake-up's default budget of "
                    f"{DEFAULT_BUDGET}; this one is left out (unmark some, or shorten subjects and anchors)")
            for memory in left]


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
    from palace_cli.editing.authoring import propose_missing_token
    from palace_cli.editing.writes import writing

    fixed, failed = [], []
    with writing(palace):  # tokens another writer added since `scan` was read are taken too
        taken = {m.verify for m in _notes(palace).memories.values() if m.verify}
        for memory in sorted(scan.memories.values(), key=lambda m: m.path):
            if not palace.site.rules.templated(memory):
                continue  # never written: the person's own note (lint --study says how to opt it in)
            try:
                if propose_missing_token(palace, memory, taken) is not memory:
                    fixed.append(f"{memory.path}: proposed a verify token")
            except (PalaceError, OSError) as exc:  # a bare-CR note, a frontmatter it cannot edit exactly, read-only
                reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
                failed.append(Problem(memory.path, memory.field_line("verify"), "warning", "not-fixed",
                                      f"could not write the proposed verify token: {reason}"))
    return fixed, failed


def stray_notes(palace: Palace) -> list[Problem]:
    """Note-like files outside memories/, except session files (their frontmatter has an `id` too); in an adopted
    vault, the Markdown files of reviews/ and conversations/, palace's own folders, which are never notes."""
    from palace_cli.conversations import CONVERSATIONS

    found = [p for p in palace.site.stray_notes() if not p.path.startswith(CONVERSATIONS + "/")]
    if palace.adopted:
        found += [Problem(relpath, None, "warning", "palace-folder", f"{relpath.split('/')[0]}/ is palace's own "
                          f"folder ({OWN_FOLDERS[relpath.split('/')[0]]}): not read as a note; move it to another "
                          "folder to have it read") for relpath in own_folder_notes(palace.root)]
    return found


OWN_FOLDERS = {REVIEWS: "the study log", "conversations": "imported chats, one session file each"}


def own_folder_notes(root, sessions: bool = False) -> list[str]:
    """Markdown files in reviews/ and at the top of conversations/ (with sessions, one folder down too: where
    session files are), relative to root: palace's own folders, never read as notes."""
    patterns = {REVIEWS: ("*.md",), "conversations": ("*.md", "*/*.md") if sessions else ("*.md",)}
    return sorted(p.relative_to(root).as_posix() for folder, globs in patterns.items() for pattern in globs
                  for p in (root / folder).glob(pattern) if not p.name.startswith("."))


def _notes(palace: Palace) -> Scan:
    """The refreshed note cache, without regenerating the index files: lint reports them, only --fix writes."""
    palace.refresh(embedder=None, index_files=False)
    return palace.index.scan()


def templated_only(scan: Scan, rules: NoteRules) -> Scan:
    """The notes of a scan that opted into palace's template (NoteRules.templated)."""
    return Scan(memories={k: m for k, m in scan.memories.items() if rules.templated(m)}, problems=scan.problems)


def study_gaps(scan: Scan, rules: NoteRules | None = None) -> list[Problem]:
    """What each note lacks to be cited (a verify token, a phrase of its Image) and studied (an Image and an
    anchor): one `study-gap` line per note that lacks any, saying what `palace evolve` proposes (and, for a note
    that has not opted into palace's template, how to opt it in first)."""
    rules = rules or NoteRules()
    problems = []
    for memory in sorted(scan.memories.values(), key=lambda m: m.path):
        lacks = [what for what, has in (("an `## Image`", memory.image), ("an `anchor`", memory.anchor),
                                        ("a `verify` token", memory.verify)) if not has]
        if lacks:
            what = ", ".join(lacks[:-1]) + (" and " if len(lacks) > 1 else "") + lacks[-1]
            first = "" if rules.templated(memory) else f"palace writes nothing into it: {OPT_IN}, then "
            problems.append(Problem(memory.path, memory.line, "warning", "study-gap",
                                    f"lacks {what} to be cited and studied; {first}`palace evolve {memory.id}` "
                                    f"proposes {'them' if len(lacks) > 1 else 'it'}"))
    return problems


def lint(palace: Palace, fix: bool = False, study: bool = False) -> LintReport:
    """Every problem in the palace; with fix, finish a write a killed process left half done, propose missing
    tokens and regenerate index files (nothing else); with study, also what each note lacks to be cited and
    studied (study_gaps)."""
    fixed: list[str] = _finish_interrupted(palace) if fix else []
    not_fixed: list[Problem] = []
    scan = _notes(palace)
    if fix:
        tokens, not_fixed = propose_missing_tokens(palace, scan)
        fixed += tokens
        # Through the refresh, under its lock and from the cache as it is then: files rendered from this scan
        # could undo a concurrent writer's newer ones, and nothing would notice until `palace index`.
        regenerated = palace.refresh(embedder=None, rewrite_index_files=True).index_files
        scan = palace.index.scan()
        fixed += [f"{path}: regenerated" if (palace.root / path).exists() else f"{path}: removed (no such domain)"
                  for path in regenerated]
    # scan.problems holds what the refresh could not index: unreadable notes and session files, repeated ids.
    rules = palace.site.rules
    files = Files(attachment_files(palace.root, palace.rules))
    problems = list(scan.problems) + note_problems(scan, rules, files) + config_problems(palace, scan)
    problems += stray_notes(palace)
    problems += version_problems(scan) + core_problems(palace, scan)
    problems += not_fixed + ReviewLog(palace).read().problems + _interrupted(palace)
    problems += weak_image_problems(templated_only(scan, rules), palace.config.raw.get("study"))
    if study:
        problems += study_gaps(scan, rules)
    for relpath in check_index_files(palace.site, scan):
        problems.append(Problem(relpath, None, "error", "stale-index",
                                "generated index file is out of date; run `palace index`", fixable=True))
    problems.sort(key=lambda p: (p.path, p.line or 0, p.code, p.message))
    return LintReport(problems, fixed)


def _finish_interrupted(palace: Palace) -> list[str]:
    """Finish a write a killed process left half done (lint --fix); what was done, as `fixed` lines."""
    from palace_cli.editing.writes import writing

    with writing(palace) as finished:
        if finished is None:
            return []
        left = f"; left as they are (changed since): {', '.join(finished.left)}" if finished.left else ""
        return [f"{finished.what}: finished (it was interrupted){left}"]


def _interrupted(palace: Palace) -> list[Problem]:
    """A write a killed process left half done: some notes changed, the rest not yet."""
    from palace_cli.editing.journal import JOURNAL, pending

    what = pending(palace)
    if what is None:
        return []
    return [Problem(palace.rel(palace.cache_dir / JOURNAL), None, "error", "interrupted-write",
                    f"`{what or 'a write'}` was interrupted with some notes changed and the rest not yet; the next "
                    "write finishes it (run it again, or `palace lint --fix`)", fixable=True)]


def merge_problems(palace: Palace, merging: bool = False) -> list[Problem]:
    """What a merge leaves wrong though git merged every file cleanly, each problem naming both notes: two notes
    with one id (one of them is not indexed), and, while a merge is in progress, links it left broken (a link
    added on one side to a note the other side removed; `merging`: see gitsetup.merge_changes). Reads the notes
    on disk; changes nothing."""
    from palace_cli.editing.gitsetup import merge_changes
    from palace_cli.index.ondisk import notes_on_disk

    disk = notes_on_disk(palace.index)
    problems = list(disk.duplicates)
    changed, removed = merge_changes(palace, merging)
    if not changed and not removed:
        return problems
    memories = {m.path: m for m in palace.index.store.iter_memories() if m.path not in disk.changed}
    memories.update(disk.fresh)
    names = Names(disk.scan.memories.values())
    gone = Names(removed)
    for memory in sorted(memories.values(), key=lambda m: m.path):
        for link, line, file, _wiki, meta in _links_with_lines(memory):
            if file:
                continue  # files are no note a merge removed
            problem = _link_problem(memory, link, line, names)
            if problem is None or problem.code != "broken-link":
                continue
            try:
                target = gone.link(link, memory.path)
            except Ambiguous:
                target = None
            if target is not None:
                problem.message = f"link {link!r} to {target.path}, which the merge removed"
                problems.append(problem)
            elif memory.path in changed and not meta:  # a meta page may be a library's, outside the vault
                problems.append(problem)
    return problems
