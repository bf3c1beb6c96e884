"""Links in every form vaults write them: where they are in a note (body and frontmatter properties), what is no
link (code, comments, math), which name a file, and the text of a link rewritten or made inert.

A link is what Obsidian, Foam and zk read as one: `[[Name]]`, `[[Name|label]]`, `[[Name#Heading]]`,
`[[Name#^block]]`, `[[Folder/Name]]`, `[[Name.md]]`, `![[embed]]` (and `[[Name\\|label]]`, as a table cell
escapes its pipe), SilverBullet's `[[Name@123]]`, `[[Name@L12C3]]` (a place in the note) and `[[^Name]]` (a meta
page, which may live in a library outside the vault), Markdown links to notes (`[text](Folder/Name%20x.md#Heading)`),
link reference definitions, and frontmatter properties holding wikilinks (`related: "[[Name]]"`, `up: ["[[P]]"]`).
Links to files that are not notes (`![[photo.jpg|100]]`, `[pdf](manual.pdf)`, `![alt](a.png)`) are found when asked
for (`files=True`).
Nothing inside code (fenced, indented or inline), an HTML comment, `$$...$$` math or a `${...}` expression
(SilverBullet's Lua: `${query[[from index.pages()]]}` is a query, not a link) is a link.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from palace_cli.core.markdown import code_spans, expression_ranges, line_numbers, outside_code

ATTACHMENT = re.compile(r"\.(?:png|jpe?g|gif|svg|webp|bmp|avif|heic|tiff?|ico|pdf|mp3|wav|ogg|m4a|flac|3gp|mp4|webm|"
                        r"mov|mkv|ogv|canvas|excalidraw|base|csv|xlsx?|docx?|pptx?|odt|ods|zip|txt|json)$",
                        re.IGNORECASE)
LINK_PATTERN = re.compile(r"\[\[([^\]|#]+)(?:[|#][^\]]*)?\]\]")
# Every [[wikilink]] (and ![[embed]]), the self links `[[#Heading]]` too: the target, then `#heading` or `|label`.
WIKILINK = re.compile(r"(!?)\[\[([^\]|#\n]*)((?:#[^\]|\n]*)?)((?:\|[^\]\n]*)?)\]\]")
# [text](target "title") and [text](<target with spaces>); `!` before it makes an image (a file, never a note).
MARKDOWN_LINK = re.compile(r"(!?)(?<![\]\\])\[(?:[^\]\\\n]|\\.)*\]\([ \t]*(?:<([^>\n]*)>|([^\s)<>]+))"
                           r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'))?[ \t]*\)")
# A link reference definition (`[label]: path/to/note.md "Title"`), as Foam writes them; footnotes (`[^1]:`) are not.
REFERENCE = re.compile(r"^[ ]{0,3}\[(?!\^)[^\]\n]+\]:[ \t]*(?:<([^>\n]*)>|(\S+))(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?[ \t]*$",
                       re.MULTILINE)
BAD_LINK_CHARS = re.compile(r"[\[\]|#^\x00-\x1f]")  # what a note's name cannot hold and still be linked to
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)  # an unclosed `<!--` hides nothing: its links stay links
MATH = re.compile(r"\$\$(?:(?!\n[ \t]*\n).)+?\$\$", re.DOTALL)  # display math holds no blank line
LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
INDENTED = re.compile(r"(?: {4}| {0,3}\t)")
# SilverBullet's place in a page after its name: `@123` (a character offset) or `@L12` / `@L12C3` (line, column).
POSITION = re.compile(r"@(?:\d+|[Ll]\d+(?:[Cc]\d+)?)$")


@dataclass(frozen=True)
class Link:
    """A link as written: its target (what names the note or file: `Name`, `Folder/Name`, `Name.md`; for a
    Markdown link or a reference definition, the path as written, decoded), the file line, the form (`wiki`,
    `embed`, `markdown`, `image`, `reference`, `property`), the heading or `^block` after `#`, where the target's
    text is (start, end: what a rename replaces), whether it names a file that is not a note, the whole link
    (outer start, end), for a property, its key, and whether it was written as a meta page link (`[[^Name]]`)."""

    target: str
    line: int
    form: str
    fragment: str
    start: int
    end: int
    file: bool = False
    outer: tuple[int, int] = (0, 0)
    key: str = ""
    meta: bool = False  # written `[[^Name]]`: SilverBullet's link to a meta page, which a library may hold

    def name(self, source: str = "") -> str:
        """What the resolver looks the link up by: a wikilink's target; a path link's name (path_link_name, from
        `source`, the linking note's path)."""
        if self.form in ("wiki", "embed", "property"):
            return self.target.strip()
        return path_link_name(source, self.target, self.file)


def is_attachment(target: str) -> bool:
    """True for a `[[link]]` to a file that is not a note (`![[diagram.png]]`, as Obsidian embeds one)."""
    return bool(ATTACHMENT.search(target.strip()))


def path_link_name(source: str, target: str, file: bool = False) -> str:
    """What the resolver looks a path link (Markdown, reference definition) in the note at `source` up by: its
    path from the root (relative to the folder of `source`, unless it starts with `/`); a link to a note written
    with no folder (`[x](Plan.md)`) is `./Plan.md`, which names `Plan.md` in that folder, else the note of that
    file name anywhere (Obsidian writes a unique name alone wherever it is). A folder written names that folder."""
    if not file and "/" not in target and target not in (".", ".."):
        return "./" + target
    return joined_path(source, target)


def joined_path(source: str, target: str) -> str:
    """A path link's target from the root: relative to the folder of `source` (a path from the root), or from
    the root when it starts with `/`; `..` folded."""
    if target.startswith("/"):
        return posixpath.normpath(target.lstrip("/"))
    folder = source.rsplit("/", 1)[0] if "/" in source else ""
    return posixpath.normpath(posixpath.join(folder, target)) if folder else posixpath.normpath(target)


# ---- where no link is ----------------------------------------------------------------------------


def _indented_code(body: str, fences: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Ranges of indented code blocks (four spaces or a tab, after a blank line, not inside a list) outside fences."""
    if "\n    " not in body and "\t" not in body and not INDENTED.match(body):
        return []
    ranges: list[tuple[int, int]] = []
    start = end = None
    offset, blank_before, in_list = 0, True, False
    for line in body.split("\n"):
        blank = not line.strip()
        indented = bool(INDENTED.match(line)) and not blank
        if start is not None and not (blank or indented):
            ranges.append((start, end))
            start = None
        if start is not None and indented:
            end = offset + len(line)
        elif start is None and indented and blank_before and not in_list and outside_code(offset, fences):
            start, end = offset, offset + len(line)
        if not blank and not indented:
            in_list = bool(LIST_ITEM.match(line)) or (in_list and not blank_before)
        blank_before = blank
        offset += len(line) + 1
    if start is not None:
        ranges.append((start, end))
    return ranges


def link_free_ranges(body: str) -> list[tuple[int, int]]:
    """Sorted, disjoint character ranges of a body where nothing is a link: code (fenced, indented, inline),
    HTML comments (`<!-- [[x]] -->`), `$$...$$` math and `${...}` expressions."""
    code = code_spans(body)
    found = list(code) + _indented_code(body, code)
    if "${" in body:
        found += expression_ranges(body, code)
    for pattern, marker in ((COMMENT, "<!--"), (MATH, "$$")):
        if marker in body:
            found += [(m.start(), m.end() - 1) for m in pattern.finditer(body) if outside_code(m.start(), code)]
    if len(found) == len(code):
        return code
    merged: list[tuple[int, int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


# ---- the links of a body and of a frontmatter ------------------------------------------------------------


def _local_target(raw: str, files: bool) -> tuple[str, str, bool] | None:
    """(path, fragment, is a file) of a Markdown link's or reference definition's target when it may name a note
    (a `.md` file or no extension) or, with files, a local file; None for a URL (`https:`, `mailto:`), a bare
    `#fragment` or a folder."""
    if not raw or SCHEME.match(raw) or raw.startswith(("#", "?")):
        return None
    path, _, fragment = raw.partition("#")
    path = unquote(path.split("?", 1)[0])
    last = path.rsplit("/", 1)[-1]
    if not last:
        return None
    is_file = not last.lower().endswith(".md") and "." in last.lstrip(".")
    if is_file and not files:
        return None  # a file that is not a note (an image, a PDF, LICENSE.txt)
    return path, unquote(fragment), is_file


def _wikilinks(body: str, free: list[tuple[int, int]], line, files: bool, form: str = "") -> list[Link]:
    found = []
    for match in WIKILINK.finditer(body):
        target, fragment, end = match.group(2), match.group(3)[1:], match.end(2)
        if match.group(4).startswith("|") and body[match.start(4) - 1] == "\\":  # `[[Name\|label]]` in a table
            if fragment:
                fragment = fragment[:-1]
            else:
                target, end = target[:-1], end - 1
        target, lead, meta = silverbullet_target(target)
        attachment = is_attachment(target)
        if not target.strip() or (attachment and not files) or not outside_code(match.start(), free):
            continue
        lead += len(target) - len(target.lstrip())
        kind = form or ("embed" if match.group(1) else "wiki")
        found.append(Link(target.strip(), line(match.start()), kind, fragment.strip(), match.start(2) + lead,
                          match.start(2) + lead + len(target.strip()), attachment, (match.start(), match.end()),
                          meta=meta))
    return found


def silverbullet_target(target: str) -> tuple[str, int, bool]:
    """A wikilink's target as SilverBullet reads it, (name, characters cut before it, whether it was a meta page
    link): `^Library/Std` names `Library/Std` (the caret only marks a meta page), `CHANGELOG@123` and
    `CHANGELOG@L12C3` name `CHANGELOG` (a place in it). No note's name starts with `^` (Obsidian forbids it); a
    name that ends in `@` and a number is read as a place, as SilverBullet reads it, wherever it is written."""
    meta = target.lstrip().startswith("^")
    lead = target.index("^") + 1 if meta else 0
    return POSITION.sub("", target[lead:].rstrip()), lead, meta


def note_links(body: str, body_first_line: int = 1, files: bool = False,
               free: list[tuple[int, int]] | None = None) -> list[Link]:
    """Every link of a body, in order, outside code, comments and math (`free`: those ranges when known; `[]` for
    none): wikilinks and note embeds, Markdown links to `.md` files and link reference definitions; with files,
    links and embeds of other files too (`![[photo.jpg|100]]`, `![alt](a.png)`). Self links (`[[#Heading]]`) and
    URLs are left out. `start`/`end` of each is its target's text, for renaming it in place."""
    if "[" not in body:
        return []
    free = link_free_ranges(body) if free is None else free
    line = line_numbers(body, body_first_line)
    found = _wikilinks(body, free, line, files)
    for pattern, form in ((MARKDOWN_LINK, "markdown"), (REFERENCE, "reference")):
        first = 2 if form == "markdown" else 1
        for match in pattern.finditer(body):
            group = first if match.group(first) is not None else first + 1
            image = form == "markdown" and bool(match.group(1))
            parsed = _local_target(match.group(group), files)
            if parsed is None or (image and not files) or not outside_code(match.start(), free):
                continue
            raw = match.group(group)
            cut = min((i for i in (raw.find("#"), raw.find("?")) if i >= 0), default=len(raw))
            start = match.start(group)
            found.append(Link(parsed[0], line(match.start()), "image" if image else form, parsed[1], start,
                              start + cut, parsed[2] or image, (match.start(), match.end())))
    found.sort(key=lambda link: link.start)
    return found


def _strings(value) -> list[str]:
    """Every string in a parsed YAML value (mappings' values and lists, however deep)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings(item)]
    return []


def property_targets(meta: dict) -> list[tuple[str, str, bool]]:
    """(key, target, names a file) of every wikilink held by a frontmatter property's string values (`related:
    "[[Name]]"`, `up: ["[[P]]"]`), in order: what the parsed frontmatter says, where property_links says where."""
    found = []
    for key, value in meta.items():
        for text in (s for s in _strings(value) if "[[" in s) if isinstance(key, str) else ():
            for match in WIKILINK.finditer(text):
                target = match.group(2)[:-1] if match.group(4).startswith("|") and not match.group(3) \
                    and match.group(2).endswith("\\") else match.group(2)
                target = silverbullet_target(target)[0]
                if target.strip():
                    found.append((key, target.strip(), is_attachment(target)))
    return found


def property_links(yaml_text: str, meta: dict, first_line: int = 2, files: bool = False) -> list[Link]:
    """The wikilinks held by frontmatter properties (`related: "[[Name]]"`, `up: ["[[P]]"]`, a block list of
    them), found in the YAML's own text (start and end are offsets in it, for a rename that keeps its quoting);
    a `[[...]]` that is no string value (a comment, an unquoted `[[x]]`, which YAML reads as a nested list) is
    not a link. `key` is the top-level key holding each."""
    if "[[" not in yaml_text:
        return []
    values = [s for key, value in meta.items() if isinstance(key, str) for s in _strings(value) if "[[" in s]
    if not values:
        return []
    keys = [(m.start(), m.group(1)) for m in re.finditer(r"^([^\s#'\"-][^:\n]*?)[ \t]*:(?=[ \t]|$)", yaml_text,
                                                         re.MULTILINE)]
    found = []
    for link in _wikilinks(yaml_text, [], line_numbers(yaml_text, first_line), files, "property"):
        written = yaml_text[link.outer[0]:link.outer[1]]
        if any(written in value for value in values):
            key = next((name for at, name in reversed(keys) if at <= link.start), "")
            found.append(Link(link.target, link.line, "property", link.fragment, link.start, link.end, link.file,
                              link.outer, key.strip()))
    return found


def body_link_lines(body: str, body_first_line: int, source: str = "") -> list[tuple[str, int]]:
    """Every link to a note in a body (note_links), as (the name the resolver looks up, file line); `source` is
    the linking note's path, which Markdown links are relative to (one that climbs out of the palace is left out)."""
    found = ((link.name(source), link.line) for link in note_links(body, body_first_line))
    return [(name, line) for name, line in found if not name.startswith("../")]  # out of the palace: no note


# ---- link text written ----------------------------------------------------------------------------------


def renamed_target(written: str, old: str, new: str) -> str:
    """A name as written (`watering schedule`) renamed from `old` to `new` in the same style: as written, all
    lowercase, all uppercase, or slugged with hyphens; so renaming back gives the bytes it had."""
    if written == old:
        return new
    if written == old.lower():
        return new.lower()
    if written == old.upper():
        return new.upper()
    if written == re.sub(r"\s+", "-", old.strip()).lower():
        return re.sub(r"\s+", "-", new.strip()).lower()
    return new


BARE_UNSAFE = re.compile(r"[\s<>\x00-\x1f]")  # what a link's path outside `<...>` cannot hold as it is


def encoded_like(written: str, plain: str, bracketed: bool = False) -> str:
    """`plain` spelled the way a path link `written` was: percent-encoded when it was (`Name%20x.md`), or when it
    was bare (not in `<...>`) and `plain` holds what a bare path cannot (a space: `New%20name.md`, as Obsidian
    writes it), so the link stays one link and renaming back gives the bytes it had."""
    if "%" in written or (not bracketed and BARE_UNSAFE.search(plain)):
        return quote(plain, safe="/-._~()!*'")
    return plain


def inert_links(text: str) -> str:
    """Text with its link syntax made plain text (`[[Home]]` -> `\\[\\[Home\\]\\]`, which every Markdown tool shows
    as written and none follows): for text quoted from elsewhere, a chat, that must not link the palace's notes."""
    return WIKILINK.sub(lambda m: m.group(0).replace("[[", "\\[\\[").replace("]]", "\\]\\]"), text)


def without_link_targets(text: str) -> str:
    """The text with the target of every link to a note cut out (`[[Name|label]]` -> `[[|label]]`, `[[Name]]` ->
    `[[]]`, `[x](a/b.md#h)` -> `[x](#h)`): what a rename rewrites, so what stays of a text's meaning when a note
    it links to is renamed (a vector's key, index/vectors.py)."""
    links = note_links(text)
    if not links:
        return text
    pieces, last = [], 0
    for link in links:
        pieces.append(text[last : link.start])
        last = link.end
    pieces.append(text[last:])
    return "".join(pieces)
