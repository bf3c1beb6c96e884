"""palace: a memory palace in plain Markdown and git.

The library's front door (see docs/library.md):

    from palace_cli import Palace, recall, verify_answer
    palace = Palace.find("~/kb")
    result = recall(palace, "why do retries need jitter?")
    verdict = verify_answer(answer_text, [context_entry(h.memory) for h in result.handed], palace)

Names are imported on first use, so `import palace_cli` (and the `palace` command) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS = {
    "Palace": "palace", "Scan": "palace", "Problem": "palace",
    "Memory": "notes",
    "init_palace": "authoring", "add_memory": "authoring", "update_memory": "changes",
    "move_memory": "curate", "remove_memory": "curate", "backlinks": "curate",
    "recall": "retrieve", "search": "retrieve", "context_entry": "retrieve",
    "Recall": "retrieve", "SearchResult": "retrieve", "Hit": "retrieve",
    "verify_response": "verify", "Verdict": "verify",
    "ask": "ask", "verify_answer": "ask", "handed_memories": "ask", "Answer": "ask",
    "lint": "lint", "LintReport": "lint",
    "wake_up": "wakeup",
    "supersede": "versions", "history": "versions", "similar": "similar",
    "import_path": "importers",
    "RefreshReport": "index.refresh",
    "PalaceError": "errors", "NotAPalace": "errors", "NotFound": "errors", "Ambiguous": "errors",
    "NoteError": "errors", "UsageError": "errors", "ConfigError": "errors", "ModelError": "errors",
}

__all__ = ["Ambiguous", "Answer", "ConfigError", "Hit", "LintReport", "Memory", "ModelError", "NotAPalace",
    "NotFound", "NoteError", "Palace", "PalaceError", "Problem", "Recall", "RefreshReport", "Scan",
    "SearchResult", "UsageError", "Verdict", "add_memory", "ask", "backlinks", "context_entry", "handed_memories",
    "history", "import_path", "init_palace", "lint", "move_memory", "recall", "remove_memory", "search", "similar",
    "supersede", "update_memory", "verify_answer", "verify_response", "wake_up", "__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'palace_cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return __all__


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from .ask import Answer, ask, handed_memories, verify_answer
    from .authoring import add_memory, init_palace
    from .changes import update_memory
    from .curate import backlinks, move_memory, remove_memory
    from .errors import (Ambiguous, ConfigError, ModelError, NotAPalace, NoteError, NotFound, PalaceError,
                         UsageError)
    from .importers import import_path
    from .index.refresh import RefreshReport
    from .lint import LintReport, lint
    from .notes import Memory
    from .palace import Palace, Problem, Scan
    from .retrieve import Hit, Recall, SearchResult, context_entry, recall, search
    from .similar import similar
    from .verify import Verdict, verify_response
    from .versions import history, supersede
    from .wakeup import wake_up
