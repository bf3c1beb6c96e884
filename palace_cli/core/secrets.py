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
NAME = (r"\b(?:[A-Za-z0-9]+[_.-])*(?:password|passwd|pwd|passphrase|secret|token|api[_-]?key|apikey|"
        r"access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|auth)")
# name = "value" / name: 'value' (quoted), or name=value (a bare literal, not followed by a call or an attribute).
ASSIGNED = re.compile(NAME + r"""(["']?\s*[=:]\s*)(?:(["'])([^"'\n]{4,200})\2|"""
                      r"""([^\s"'`,;()\[\]{}<>]{5,199}[^\s"'`,;()\[\]{}<>.!?:])(?![\w(\[]|\.\w))""", re.IGNORECASE)
# What stands for a value in documentation and code: <password>, ${DB_PASS}, {{ token }}, $TOKEN, %s, PASSWORD,
# ***, xxxx, ..., and a dotted name (`form.password.data`).
PLACEHOLDER = re.compile(r"<.*>|\$\{.*\}|\{\{.*\}\}|\$[A-Za-z_]\w*|%\(?\w*\)?s|[A-Z][A-Z0-9_]*|\W+|[xX]+|"
                         r"\[redacted\]|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def redact(text: str) -> tuple[str, int]:
    """`text` with each secret replaced by `[redacted]` and each `<private>` span dropped, and how many were."""
    if not text:
        return text, 0
    text, total = PRIVATE.subn("", text)
    for pattern, replace in ((PEM, REDACTED), (URL_PASSWORD, rf"\1{REDACTED}"), (KEYS, REDACTED)):
        text, count = pattern.subn(replace, text)
        total += count
    count = 0

    def assigned(match: re.Match) -> str:
        nonlocal count
        separator, quote, quoted, bare = match.group(1), match.group(2), match.group(3), match.group(4)
        value = quoted if quoted is not None else bare
        if PLACEHOLDER.fullmatch(value) or (":" in separator and quoted is None and not re.search(r"\d", value)):
            return match.group(0)
        count += 1
        start = match.start(3 if quoted is not None else 4) - match.start()
        end = match.end(3 if quoted is not None else 4) - match.start()
        return match.group(0)[:start] + REDACTED + match.group(0)[end:]

    text = ASSIGNED.sub(assigned, text)
    return text, total + count


def without_secrets(text: str) -> str:
    """`text` redacted (see `redact`), without the count."""
    return redact(text)[0]
