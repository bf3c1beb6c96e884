"""Secrets in text that is about to be written into a palace (imports, captures, quick capture): the well-known
shapes of keys, tokens, private keys and passwords, redacted to `[redacted]`, and `<private>...</private>` spans,
dropped. One home for these shapes; docs/conversations.md lists them and the rule for near misses.

The shapes are specific on purpose: a random-looking string alone (a commit hash, a UUID, a checksum) is not a
secret, and a key's prefix in prose ("sk-learn", "ghp_ tokens") is not a key. A setting name followed by a value
(`password=hunter22`) is one only when the value is a literal of 6 characters or more that is not a placeholder
(`<password>`, `${DB_PASS}`, `$TOKEN`, `PASSWORD`, `...`, `***`) nor code (`token = load_token()`); after a colon,
which prose uses too ("password: the account's"), only a quoted value or one holding a digit counts.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"
PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.DOTALL | re.IGNORECASE)
PEM = re.compile(r"-{5}BEGIN[A-Z0-9 ]*PRIVATE KEY-{5}(?:.*?-{5}END[A-Z0-9 ]*PRIVATE KEY-{5}|"
                 r"(?:\s*[A-Za-z0-9+/=]{16,})*)", re.DOTALL)
# scheme://user:password@host: the password only (the address stays readable).
URL_PASSWORD = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@]{1,200}:)[^\s/@]{1,200}(?=@)")
MIXED = r"(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])"  # a random body holds both letters and digits
KEYS = re.compile("|".join((
    rf"\bsk-{MIXED}[A-Za-z0-9_-]{{20,}}",                          # OpenAI, Anthropic (sk-ant-...), sk-live-...
    r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}",                     # Stripe secret and restricted keys
    r"\bgh[pousr]_[A-Za-z0-9]{30,}", r"\bgithub_pat_[A-Za-z0-9_]{30,}",  # GitHub tokens
    r"\bglpat-[A-Za-z0-9_-]{20,}",                                 # GitLab personal access tokens
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",                            # Slack tokens
    r"https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,}",       # Slack webhooks
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",                              # AWS access key ids
    r"\bAIza[0-9A-Za-z_-]{35}", r"\bya29\.[0-9A-Za-z_-]{20,}",     # Google API keys, OAuth access tokens
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWTs (a JSON header and payload)
    rf"(?<=\bBearer ){MIXED}[A-Za-z0-9._~+/-]{{20,}}=*",              # a bearer token in a header
)))
# The name's own word; that it starts a word or follows a joiner (`DB_PASSWORD`, `app.secret`) is checked on each
# match (`_named`): a pattern that begins with the words is scanned 10 times faster than one that begins with a check.
NAME = (r"(?:password|passwd|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|"
        r"private[_-]?key|client[_-]?secret|auth)")
# name = "value" / name: 'value' (quoted), or name=value (a bare literal, not followed by a call or an attribute).
ASSIGNED = re.compile(NAME + r"""(["']?\s*[=:]\s*)(?:(["'])([^"'\n]{4,200})\2|"""
                      r"""([^\s"'`,;()\[\]{}<>]{5,199}[^\s"'`,;()\[\]{}<>.!?:])(?![\w(\[]|\.\w))""", re.IGNORECASE)
# What stands for a value in documentation and code: <password>, ${DB_PASS}, {{ token }}, $TOKEN, %s, PASSWORD,
# ***, xxxx, ..., and a dotted name (`form.password.data`).
PLACEHOLDER = re.compile(r"<.*>|\$\{.*\}|\{\{.*\}\}|\$[A-Za-z_]\w*|%\(?\w*\)?s|[A-Z][A-Z0-9_]*|\W+|[xX]+|"
                         r"\[redacted\]|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


# What each pattern needs somewhere in the text before it is worth running (a substring test is a hundred times
# faster than the patterns, and most turns hold none of these): a whole session is redacted at megabytes a second.
NEEDS = ((PEM, ("PRIVATE KEY",)), (URL_PASSWORD, ("://",)),
         (KEYS, ("sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "hooks.slack.com", "AKIA", "ASIA", "AIza",
                 "ya29.", "eyJ", "Bearer ")))
NAMED = ("pass", "pwd", "secret", "token", "key", "auth")
FIND_NAME = re.compile(NAME)  # on lowered text


def redact(text: str) -> tuple[str, int]:
    """`text` with each secret replaced by `[redacted]` and each `<private>` span dropped, and how many were."""
    if not text:
        return text, 0
    total = 0
    if "<" in text:
        text, total = PRIVATE.subn("", text)
    for pattern, needs in NEEDS:
        if any(need in text for need in needs):
            text, count = pattern.subn(rf"\1{REDACTED}" if pattern is URL_PASSWORD else REDACTED, text)
            total += count
    lowered = text.lower()
    if not any(name in lowered for name in NAMED) or ("=" not in text and ":" not in text):
        return text, total
    text, count = _assignments(text, lowered)
    return text, total + count


def _assignments(text: str, lowered: str) -> tuple[str, int]:
    """Each `name = value` whose value is a literal (see the module) redacted; how many were. The names are found
    in the lowered text (a case-blind pattern scans 10 times slower), each checked where it stands."""
    starts = (m.start() for m in FIND_NAME.finditer(lowered)) if len(lowered) == len(text) else \
        (m.start() for m in ASSIGNED.finditer(text))  # a letter whose lower case is longer: the slow way
    out, last, count = [], 0, 0
    for start in starts:
        match = ASSIGNED.match(text, start) if start >= last else None
        if match is None or not _named(text, start):
            continue
        separator, quote, quoted, bare = match.group(1), match.group(2), match.group(3), match.group(4)
        value = quoted if quoted is not None else bare
        if PLACEHOLDER.fullmatch(value) or (":" in separator and quoted is None and not re.search(r"\d", value)):
            continue
        group = 3 if quoted is not None else 4
        out += [text[last:match.start(group)], REDACTED]
        last = match.end(group)
        count += 1
    return "".join(out) + text[last:], count


def _named(text: str, start: int) -> bool:
    """Whether the name found at `start` begins a word, or follows a joiner after a letter or digit (`DB_`)."""
    before = text[start - 1] if start else " "
    if not (before.isalnum() or before in "_.-"):
        return True
    return before in "_.-" and start > 1 and text[start - 2].isascii() and text[start - 2].isalnum()


def without_secrets(text: str) -> str:
    """`text` redacted (see `redact`), without the count."""
    return redact(text)[0]
