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
    "Palace": "palace", "Scan": "core.layout", "Problem": "core.layout",
    "Memory": "core.notes",
    "init_palace": "editing.initplan", "add_memory": "editing.authoring", "update_memory": "editing.changes",
    "move_memory": "editing.curate", "remove_memory": "editing.curate", "backlinks": "editing.curate",
    "recall": "search.retrieve", "search": "search.retrieve", "context_entry": "search.hits",
    "Query": "search.query", "make_query": "search.query",
    "Recall": "search.hits", "SearchResult": "search.hits", "Hit": "search.hits",
    "verify_response": "answers.verify", "Verdict": "answers.verify",
    "ask": "answers.ask", "verify_answer": "answers.ask", "handed_memories": "answers.ask", "Answer": "answers.ask",
    "lint": "editing.lint", "LintReport": "editing.lint",
    "wake_up": "search.wakeup",
    "supersede": "editing.versions", "history": "editing.versions", "similar": "search.similar",
    "import_path": "importers",
    "RefreshReport": "index.refresh",
    "PalaceError": "errors", "NotAPalace": "errors", "NotFound": "errors", "Ambiguous": "errors",
    "NoteError": "errors", "UsageError": "errors", "ConfigError": "errors", "ModelError": "errors",
}

__all__ = ["Ambiguous", "Answer", "ConfigError", "Hit", "LintReport", "Memory", "ModelError", "NotAPalace",
    "NotFound", "NoteError", "Palace", "PalaceError", "Problem", "Query", "Recall", "RefreshReport", "Scan",
    "SearchResult", "UsageError", "Verdict", "add_memory", "ask", "backlinks", "context_entry", "handed_memories",
    "history", "import_path", "init_palace", "lint", "make_query", "move_memory", "recall", "remove_memory", "search", "similar",
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
    from palace_cli.answers.ask import Answer, ask, handed_memories, verify_answer
    from palace_cli.editing.authoring import add_memory
    from palace_cli.editing.initplan import init_palace
    from palace_cli.editing.changes import update_memory
    from palace_cli.editing.curate import backlinks, move_memory, remove_memory
    from palace_cli.errors import (Ambiguous, ConfigError, ModelError, NotAPalace, NoteError, NotFound, PalaceError,
                         UsageError)
    from palace_cli.importers import import_path
    from palace_cli.index.refresh import RefreshReport
    from palace_cli.editing.lint import LintReport, lint
    from palace_cli.core.notes import Memory
    from palace_cli.palace import Palace
    from palace_cli.core.layout import Problem, Scan
    from palace_cli.search.query import Query, make_query
    from palace_cli.search.retrieve import recall, search
    from palace_cli.search.hits import Hit, Recall, SearchResult, context_entry
    from palace_cli.search.similar import similar
    from palace_cli.answers.verify import Verdict, verify_response
    from palace_cli.editing.versions import history, supersede
    from palace_cli.search.wakeup import wake_up
