"""Creating palaces and memories: `palace init` and `palace add`."""

from __future__ import annotations

import subprocess
from datetime import date
from importlib import resources
from pathlib import Path

from .config import CONFIG_NAME
from .errors import PalaceError, UsageError
from .notes import ID_PATTERN, Memory, atomic_write, load_note, render_note, slugify
from .palace import INDEX_DIR, MEMORIES, REVIEWS, Palace
from .tokens import propose_token

GITIGNORE = ".palace/\n"
GITATTRIBUTES = "reviews/*.jsonl merge=union\n"


def template_text(name: str) -> str:
    """A file from palace_cli/templates."""
    return resources.files("palace_cli").joinpath("templates", name).read_text(encoding="utf-8")


def _ensure_line(path: Path, line: str) -> None:
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    if line.strip() not in existing.splitlines():
        atomic_write(path, existing + ("" if existing.endswith("\n") or not existing else "\n") + line)


def init_palace(directory: Path, name: str | None = None) -> Path:
    """Create a palace in directory (git init when not already in a repository); returns the root."""
    root = Path(directory).expanduser().resolve()
    if (root / CONFIG_NAME).exists():
        raise PalaceError(f"{root} is already a palace ({CONFIG_NAME} exists)")
    root.mkdir(parents=True, exist_ok=True)
    title = name or root.name.replace("-", " ").replace("_", " ").title()
    atomic_write(root / CONFIG_NAME, template_text("palace.toml").format(name=title.replace('"', "'")))
    for folder in (MEMORIES, INDEX_DIR, REVIEWS):
        (root / folder).mkdir(exist_ok=True)
        keep = root / folder / ".gitkeep"
        if not any((root / folder).iterdir()):
            keep.touch()
    _ensure_line(root / ".gitignore", GITIGNORE)
    _ensure_line(root / ".gitattributes", GITATTRIBUTES)
    inside_repo = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=root,
                                 capture_output=True, text=True).returncode == 0
    if not inside_repo:
        subprocess.run(["git", "init", "-q"], cwd=root, check=False, capture_output=True)
    from .indexfiles import write_index_files

    write_index_files(Palace(root))
    return root


def add_memory(palace: Palace, subject: str, domain: str, *, anchor: str = "", image: str = "", content: str = "",
               keywords: list[str] | None = None, links: list[str] | None = None, verify: str | None = None,
               note_id: str | None = None, extra: dict | None = None, overwrite: bool = False) -> Memory:
    """Write a new SMASHIN note under memories/<domain>/ and return it; refuses to overwrite."""
    subject = subject.strip()
    if not subject:
        raise UsageError("a memory needs a subject")
    domain = slugify(domain) if domain else ""
    if not domain:
        raise UsageError("a memory needs a domain (--domain)")
    note_id = note_id or slugify(subject)
    if not ID_PATTERN.match(note_id):
        raise UsageError(f"id {note_id!r} must be lowercase letters, digits, '.', '_' or '-'")
    scan = palace.scan(force=True)
    existing = scan.memories.get(note_id)
    path = palace.memories_dir / domain / f"{note_id}.md"
    if (existing or path.exists()) and not overwrite:
        where = existing.path if existing else palace.rel(path)
        raise PalaceError(f"memory {note_id!r} already exists at {where}; choose another --id")
    keywords = [k.strip() for k in (keywords or []) if k.strip()]
    links = [link.strip() for link in (links or []) if link.strip()]
    if verify is None and image.strip():
        taken = {m.verify for m in scan.memories.values() if m.verify}
        verify = propose_token(image, subject, keywords, content, taken) or ""
    fields = {"id": note_id, "subject": subject, "anchor": anchor.strip(), "keywords": keywords,
              "verify": (verify or "").strip(), "links": links, "created": date.today().isoformat()}
    fields.update(extra or {})
    text = render_note(fields, image, content)
    atomic_write(path, text)
    palace.invalidate()
    return load_note(palace.root, palace.rel(path), domain)
