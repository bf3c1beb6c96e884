"""palace.toml: finding the palace root and reading its settings."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from palace_cli.errors import ConfigError, NotAPalace

CONFIG_NAME = "palace.toml"
# A domain is a folder name: anything a folder can be called, but not hidden, and no path separator or control
# character (adopted vaults have folders named "Daily notes" or "日記").
DOMAIN_NAME = re.compile(r"^[^\x00-\x1f\x7f./\\][^\x00-\x1f\x7f/\\]*$")
# The notes an adopted vault holds by default: every Markdown file but palace's own and a templates folder.
DEFAULT_INCLUDE = ("**/*.md",)
DEFAULT_EXCLUDE = ("templates/**", "_templates/**")
DOMAIN_RULES = ("folder", "single")
INDEX_FOLDER_PART = re.compile(r"^[^\x00-\x1f\x7f/\\]+$")


@dataclass
class NotesConfig:
    """Which Markdown files are notes and how their domain is named (palace.toml [notes]).

    Without `include` a palace keeps the `memories/<domain>/` layout: only notes under memories/. With it
    (what `palace init` writes on a folder that already holds Markdown) every file the globs include and
    do not exclude is a note, wherever it lies; its domain is its top folder (`domains = "folder"`) or one
    domain for all (`"single"`), and a note at the root is in `root_domain`. `template` globs name notes
    that follow palace's template (lint checks it, `lint --fix` and study may write it) besides those with a
    `verify` field or, in memories/, the SMASHIN sections."""

    adopted: bool = False
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    domains: str = "folder"
    root_domain: str = "root"
    inbox: str = "inbox"
    index_folder: str = ""  # where the generated INDEX.md and index/ go ("" is the root)
    template: tuple[str, ...] = ()  # globs of notes that follow palace's template (besides opted-in ones)


@dataclass
class DomainConfig:
    """What palace.toml says about one domain: a description and aliases."""

    name: str
    description: str = ""
    aliases: list[str] = field(default_factory=list)


@dataclass
class PalaceConfig:
    """The parsed palace.toml."""

    name: str
    identity: str = ""
    domains: dict[str, DomainConfig] = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    retrieval: dict = field(default_factory=dict)
    notes: NotesConfig = field(default_factory=NotesConfig)
    raw: dict = field(default_factory=dict)


def find_root(start: Path | None = None, explicit: str | os.PathLike | None = None) -> Path:
    """Return the palace root: explicit dir, else $PALACE_DIR, else walk up to palace.toml."""
    chosen = explicit or os.environ.get("PALACE_DIR")
    if chosen:
        root = Path(chosen).expanduser().resolve()
        if not (root / CONFIG_NAME).is_file():
            raise NotAPalace(f"{root} is not a palace (no {CONFIG_NAME}); run `palace init {root}`")
        return root
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / CONFIG_NAME).is_file():
            return candidate
    raise NotAPalace(f"not inside a palace (no {CONFIG_NAME} in {here} or above); run `palace init` or pass --palace DIR")


def load_config(root: Path) -> PalaceConfig:
    """Parse root/palace.toml; a broken file raises ConfigError naming it."""
    path = root / CONFIG_NAME
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{path}: nested too deeply to read") from None
    palace = _table(raw, "palace", path)
    domains = {}
    for name, spec in _table(raw, "domains", path).items():
        if not DOMAIN_NAME.match(name):
            raise ConfigError(f"{path}: [domains.{name}]: a domain name is a folder name (not hidden, no '/' or "
                              "control character)")
        if not isinstance(spec, dict):
            raise ConfigError(f"{path}: [domains.{name}] must be a table")
        aliases = spec.get("aliases", [])
        if isinstance(aliases, str):
            aliases = [aliases]
        if not isinstance(aliases, list):
            raise ConfigError(f"{path}: [domains.{name}] aliases must be a list of strings")
        domains[name] = DomainConfig(name, str(spec.get("description", "")), [str(a) for a in aliases])
    return PalaceConfig(
        name=str(palace.get("name", root.name)),
        identity=str(palace.get("identity", "")).strip(),
        domains=domains,
        models=_table(raw, "models", path),
        retrieval=_table(raw, "retrieval", path),
        notes=_notes(raw, path),
        raw=raw,
    )


def _notes(raw: dict, path: Path) -> NotesConfig:
    """The [notes] table, checked (no table: the memories/ layout)."""
    if "notes" not in raw:
        return NotesConfig()
    table = _table(raw, "notes", path)
    globs = {}
    for key, default in (("include", DEFAULT_INCLUDE), ("exclude", DEFAULT_EXCLUDE)):
        value = table.get(key, list(default))
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise ConfigError(f"{path}: [notes] {key} must be a list of glob patterns like [\"**/*.md\"]")
        globs[key] = tuple(v.strip().lstrip("/") for v in value)
    rule = table.get("domains", "folder")
    if rule not in DOMAIN_RULES:
        raise ConfigError(f"{path}: [notes] domains = {rule!r}; choose from {', '.join(DOMAIN_RULES)}")
    names = {}
    for key, default in (("root_domain", "root"), ("inbox", "inbox")):
        value = str(table.get(key, default)).strip()
        if not DOMAIN_NAME.match(value):
            raise ConfigError(f"{path}: [notes] {key} = {value!r} is not a folder name")
        names[key] = value
    folder = str(table.get("index_folder", "")).strip().strip("/")
    parts = folder.split("/")
    # A dot-folder is allowed (vault tools do not read it as notes), but not `.`/`..`, and never inside .git/.
    if folder and (not all(INDEX_FOLDER_PART.match(part) and part not in (".", "..") for part in parts)
                   or parts[0] == ".git"):
        raise ConfigError(f"{path}: [notes] index_folder = {folder!r} must be a folder inside the palace")
    template = table.get("template", [])
    if isinstance(template, str):
        template = [template]
    if not isinstance(template, list) or not all(isinstance(v, str) and v.strip() for v in template):
        raise ConfigError(f"{path}: [notes] template must be a list of glob patterns like [\"Cards/**\"]")
    return NotesConfig("include" in table, globs["include"], globs["exclude"], rule, names["root_domain"],
                       names["inbox"], folder, tuple(v.strip().lstrip("/") for v in template))


def _table(raw: dict, name: str, path: Path) -> dict:
    value = raw.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: `{name}` must be a table ([{name}]), not a {type(value).__name__}")
    return value
