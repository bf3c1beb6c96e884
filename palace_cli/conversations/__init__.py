"""Conversations in a palace, as the index reads them: the session model and the session file.

No click, no rich, nothing but core: `model` (Session, Turn, what every reader returns) and `sessionfile`
(one Markdown file per session: render and parse). The readers of chat exports and the writer of session
files into a palace are importers (`palace_cli.importers.chats`); the index reads files through `parse_session`.
"""

from palace_cli.conversations.model import INCLUDABLE, ReadProblem, ReadResult, Session, Turn
from palace_cli.conversations.sessionfile import CONVERSATIONS, load_session, parse_session, render_session, session_files

__all__ = ["CONVERSATIONS", "INCLUDABLE", "ReadProblem", "ReadResult", "Session", "Turn", "load_session",
           "parse_session", "render_session", "session_files"]
