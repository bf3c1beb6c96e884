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
DOMAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


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
            raise ConfigError(f"{path}: [domains.{name}]: a domain name is a folder name: letters, digits, '.', '_', '-'")
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
        raw=raw,
    )


def _table(raw: dict, name: str, path: Path) -> dict:
    value = raw.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: `{name}` must be a table ([{name}]), not a {type(value).__name__}")
    return value
