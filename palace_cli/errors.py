"""Errors a person can read as they are; the CLI turns them into exit codes."""


class PalaceError(Exception):
    """Base for every error palace reports to a user (exit code 1)."""

    exit_code = 1


class NotAPalace(PalaceError):
    """No palace.toml was found walking up from the starting directory."""


class ConfigError(PalaceError):
    """palace.toml or the user config could not be read."""


class NoteError(PalaceError):
    """A note could not be parsed or written; the message names the file and line."""

    def __init__(self, path, message, line=None):
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


class NotAMemory(PalaceError):
    """A path under memories/ that is not a memory (a link out, a loop, not a regular file); `code` for lint."""

    def __init__(self, code, message):
        self.code = code
        self.reason = message
        super().__init__(message)


class NotFound(PalaceError):
    """A memory, domain or file asked for does not exist."""


class Ambiguous(PalaceError):
    """A name matched more than one memory; `candidates` are their ids."""

    def __init__(self, message: str, candidates: list[str] | None = None):
        super().__init__(message)
        self.candidates = list(candidates or [])


class UsageError(PalaceError):
    """Arguments that cannot work together (exit code 2)."""

    exit_code = 2


class ModelError(PalaceError):
    """A model is missing, broken or could not be installed."""


class ImportFailed(PalaceError):
    """An import source is malformed; nothing was written."""


class DiskError(OSError, PalaceError):
    """A file could not be written (a read-only or full disk, permissions); what was there is as it was.

    Also an OSError (with the errno), so code that handles a failed write as an OSError still does."""

    def __init__(self, errno_: int | None, message: str):
        super().__init__(errno_, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class OutsidePalace(PalaceError):
    """A path argument that would reach outside the palace's memories."""
