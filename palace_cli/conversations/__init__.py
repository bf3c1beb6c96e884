"""Conversations in a palace: sessions imported from chat tools, one Markdown file per session.

No click, no rich: readers per source format (registered in `sources.SOURCES`), the session file (render
and parse), the import writer. The faces call `import_conversations`; the index reads files through `parse_session`.
"""

from palace_cli.conversations.model import INCLUDABLE, ReadProblem, ReadResult, Session, Turn
from palace_cli.conversations.sessionfile import CONVERSATIONS, load_session, parse_session, render_session, session_files
from palace_cli.conversations.sources import FORMATS, SOURCES, read_conversations

__all__ = ["CONVERSATIONS", "FORMATS", "INCLUDABLE", "ReadProblem", "ReadResult", "SOURCES", "Session", "Turn",
           "load_session", "parse_session", "read_conversations", "render_session", "session_files"]
