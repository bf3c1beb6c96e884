"""An open buffer that takes a keystroke in time of the lines it touches, not of the whole buffer.

pygls applies an incremental change by splitting the whole text into lines and writing every line back out,
on every keystroke: 143 ms a keystroke in a 13 MB buffer, so a typing storm queued minutes of work ahead of
every request (issue 34, row 19). `LiveDocument` keeps the lines as a list and replaces only the lines a
change touches (and one line on each side, where a `\\r` meeting a `\\n` can join two lines); the text is
joined again only when something reads it (a lint after the debounce, a request), once per version.
"""

from __future__ import annotations

import types

from pygls.workspace import TextDocument


class LiveDocument(TextDocument):
    """pygls's TextDocument with lines kept between changes; `source` and `lines` read as pygls's do."""

    _split: list[str] | None = None  # the lines (as `str.splitlines(True)` gives them), once split
    _stale: bool = False  # the lines are newer than `_source`

    @property
    def source(self) -> str:
        if self._stale:
            self._source, self._stale = "".join(self._split), False
        return super().source

    @property
    def lines(self) -> list[str]:
        if self._split is None:
            self._split = self.source.splitlines(True)
        return self._split

    def _apply_full_change(self, change) -> None:
        super()._apply_full_change(change)
        self._split, self._stale = None, False

    def _apply_none_change(self, change) -> None:
        super()._apply_none_change(change)
        self._split, self._stale = None, False

    def _apply_incremental_change(self, change) -> None:
        """Replace the changed lines (and their neighbours) by the new text's lines."""
        lines = self.lines
        where = self._position_codec.range_from_client_units(lines, change.range)
        count = len(lines)
        first = max(min(where.start.line, count - 1) - 1, 0)
        last = min(where.end.line + 1, count - 1)
        region = "".join(lines[first : last + 1])
        start, end = _offset(lines, first, where.start), _offset(lines, first, where.end)
        end = max(min(end, len(region)), start)
        lines[first : last + 1] = (region[:start] + change.text + region[end:]).splitlines(True)
        self._stale = True


def _offset(lines: list[str], first: int, position) -> int:
    """Where a position falls in the text of the lines from `first` on; a column past its line's end counts as
    pygls counts it (up to the end of the line, its line break included)."""
    if position.line >= len(lines):
        return sum(len(line) for line in lines[first:])
    return sum(len(lines[n]) for n in range(first, position.line)) + min(position.character, len(lines[position.line]))


def make_live(workspace) -> None:
    """Have a pygls workspace open every buffer as a LiveDocument (the workspace's documents are made by this
    one method; pygls builds the workspace itself, so it is taught rather than replaced)."""

    def create(self, doc_uri: str, source: str | None = None, version: int | None = None,
               language_id: str | None = None) -> TextDocument:
        return LiveDocument(doc_uri, source=source, version=version, language_id=language_id,
                            sync_kind=self._sync_kind, position_codec=self._position_codec)

    workspace._create_text_document = types.MethodType(create, workspace)
