"""Check a palace: notes that cannot be read, missing fields, broken links, token problems, stale indices."""

from __future__ import annotations

from dataclasses import dataclass, field

from .indexfiles import check_index_files, write_index_files
from .notes import update_frontmatter
from .palace import Palace, Problem, Scan
from .smashin import weak_image_problems
from .tokens import propose_token, token_problems


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

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"problems": [p.as_dict() for p in self.problems], "errors": self.errors,
                "warnings": self.warnings, "fixed": self.fixed}


def note_problems(scan: Scan) -> list[Problem]:
    """Per-memory problems: warnings from parsing, broken links, verify tokens."""
    problems = []
    tokens = {m.id: m.verify for m in scan.memories.values() if m.verify}
    for memory in sorted(scan.memories.values(), key=lambda m: m.path):
        for warning in memory.warnings:
            severity = "error" if warning.code == "missing-field" else "warning"
            problems.append(Problem(memory.path, warning.line, severity, warning.code, warning.message))
        for link in memory.all_links:
            if link not in scan.memories:
                problems.append(Problem(memory.path, 2, "error", "broken-link", f"link to unknown memory {link!r}"))
        others = {i: t for i, t in tokens.items() if i != memory.id}
        for code, message in token_problems(memory.verify, memory.image, memory.subject, memory.keywords,
                                            memory.content, others):
            fixable = code == "token-missing" and bool(memory.image)
            severity = "warning" if code == "token-guessable" else "error"
            problems.append(Problem(memory.path, 2, severity, code, message, fixable=fixable))
    return problems


def lint(palace: Palace, fix: bool = False) -> LintReport:
    """Every problem in the palace; with fix, regenerate index files and propose missing tokens."""
    fixed: list[str] = []
    scan = palace.scan(force=True)
    if fix:
        taken = {m.verify for m in scan.memories.values() if m.verify}
        for memory in scan.memories.values():
            if memory.verify or not memory.image:
                continue
            token = propose_token(memory.image, memory.subject, memory.keywords, memory.content, taken)
            if token:
                update_frontmatter(palace.root / memory.path, {"verify": token}, memory.path)
                taken.add(token)
                fixed.append(f"{memory.path}: proposed verify token")
        if fixed:
            scan = palace.scan(force=True)
        report = write_index_files(palace, scan)
        fixed += [f"{path}: regenerated" for path in report.written]
        fixed += [f"{path}: removed (no such domain)" for path in report.removed]
    problems = list(scan.problems) + note_problems(scan) + palace.stray_notes()
    problems += weak_image_problems(scan, palace.config.raw.get("study"))
    for relpath in check_index_files(palace, scan):
        problems.append(Problem(relpath, None, "error", "stale-index", "generated index file is out of date; run `palace index`",
                                fixable=True))
    problems.sort(key=lambda p: (p.path, p.line or 0, p.code))
    return LintReport(problems, fixed)
