"""Conversations in a palace: sessions imported from chat tools, one Markdown file per session.

No click, no rich: readers per source format, the session file (render and parse), the import
writer. The faces call `import_conversations`; the index reads files through `parse_session`.
"""

from .model import INCLUDABLE, ReadProblem, ReadResult, Session, Turn
from .sessionfile import CONVERSATIONS, load_session, parse_session, render_session, session_files
from .sources import FORMATS, detect, read_conversations

__all__ = ["CONVERSATIONS", "FORMATS", "INCLUDABLE", "ReadProblem", "ReadResult", "Session", "Turn", "detect",
           "load_session", "parse_session", "read_conversations", "render_session", "session_files"]
