"""Secrets in text that is about to be written into a palace (imports, captures, quick capture): the well-known
shapes of keys, tokens, private keys and passwords, redacted to `[redacted]`, and `<private>...</private>` spans,
dropped. One home for these shapes; docs/import.md (Secrets) lists them and the rule for near misses.

The shapes are specific on purpose: a random-looking string alone (a commit hash, a UUID, a checksum) is not a
secret, and a key's prefix in prose ("sk-learn", "ghp_ tokens") is not a key. A setting name followed by a value
(`password=hunter22`) is one only when the value is a literal of 6 characters or more that is not a placeholder
(`<password>`, `${DB_PASS}`, `$TOKEN`, `PASSWORD`, `...`, `***`) nor code (`token = load_token()`); after a colon,
which prose uses too ("password: the account's"), only a quoted value or one holding a digit counts.

A secret said in words counts too ("the redis password is Tr0ub4dor&3xyz", "changed the PIN to 4821", "with
password Hunter2!"): see `said`. A value's end is the end of its run of characters, less the sentence's own
punctuation (a final `.`, `,`, `;`, `:`, `?`, a closing quote or bracket it did not open); a final `!` is the
value's (passwords end in one far more often than a sentence about one does).
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
                      r"""([^\s"'`,;()\[\]{}<>]{5,199}[^\s"'`,;()\[\]{}<>.?:])(?![\w(\[]|\.\w))""", re.IGNORECASE)
# What stands for a value in documentation and code: <password>, ${DB_PASS}, {{ token }}, $TOKEN, %s, PASSWORD,
# ***, xxxx, ..., and a dotted name (`form.password.data`).
PLACEHOLDER = re.compile(r"<.*>|\$\{.*\}|\{\{.*\}\}|\$[A-Za-z_]\w*|%\(?\w*\)?s|[A-Z][A-Z0-9_]*|\W+|[xX]+|"
                         r"\[redacted\]|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


# A credential named in words (on lowered text; that it is a whole word is checked on each match): the nouns that
# name one secret value. The singular only: a plural names them in general ("passwords must be 12 characters"),
# as a policy does. Two-word names come first, so that "secret key" is not read as "secret" and a value "key".
CREDENTIAL = re.compile(r"(?:api|access|secret|private|signing|encryption|master|license|recovery) key|"
                        r"(?:recovery|backup) code|pin (?:code|number)|pass code|password|passwd|passphrase|"
                        r"passcode|pwd|apikey|secret|token|pin")
# What joins the name to its value, on one line: `=`, `:`, `->`; is / was / 's (now, still) (set to); set / changed /
# reset to; "for staging is"; "(I) changed it to"; "to"; or nothing ("with password X": `bare`, which asks more of
# the value). Markup may close the name first (`**Password**: X`).
_S, _VERBS = r"[ \t]+", r"(?:set|changed|reset|updated|rotated|switched)"
CONNECTOR = re.compile("|".join((
    r"(?:\*\*|__|\*|`)?(?:(?P<sign>[ \t]*(?:[=:]|->|=>)[ \t]*)",
    rf"(?:{_S}(?:is|was|will{_S}be|becomes|became|remains)|'s)(?:{_S}(?:now|still|currently|just|actually))?"
    rf"(?:{_S}(?:set|changed|reset|updated){_S}to)?[ \t]*:?{_S}",
    rf"{_S}(?:(?:has{_S}been|had{_S}been|is|was|got){_S})?{_VERBS}{_S}to{_S}",
    rf",?{_S}(?:and{_S})?(?:(?:i|we|you|they){_S})?{_VERBS}{_S}it{_S}to{_S}",
    rf"{_S}(?:for|of|on|to){_S}(?:(?:the|my|our|your){_S})?[\w.-]+(?:{_S}[\w.-]+)?"
    rf"(?:{_S}(?:is|was){_S}|[ \t]*[:=][ \t]*)",
    rf"{_S}to{_S}", rf"(?P<bare>{_S}))(?=\S)")), re.IGNORECASE)
VALUE = re.compile(r"\S{1,300}")
OPENERS, CLOSERS = "\"'`(\u201c\u2018[", "\"'`)\u201d\u2019]"
SENTENCE_END = ".,;:?" + CLOSERS
# The symbols of a password ("Tr0ub4dor&3xyz"), not of words and names (`-`, `_`, `.`, `/`, `'`).
SYMBOLS = frozenset("!@#$%^&*+=~|\\?")
# Names of algorithms, encodings, protocols and types that notes about passwords and tokens use: letters and
# digits as a password has them, but no secret ("the token is HS256", "SHA256-hashed", "utf-8").
TECH = (r"(?:sha|md|aes|rsa|des|rc|hs|rs|es|ps|crc|blake|base|utf|ucs|ed|x|p|pkcs|oauth|tls|ssl|http|ipv|v|fido|"
        r"argon|pbkdf|ecdsa|secp|curve|gpt|int|uint|float|s|k|h|l|w)-?\d{1,5}(?:id|[a-z])?|\d{1,2}(?:fa|d|k|x)|"
        r"e2e|k8s|i18n|l10n|a11y|base64url|x\.509")
# A value that is words and such names joined ("time-limited", "SHA256-hashed", "token_id", "config.yaml"), a
# version or an address, a number with its unit ("3600s", "12chars"), a path, a URL or an email address.
NOT_SECRET = re.compile(rf"(?:(?:{TECH}|[A-Za-z]+)(?:[-_/+.](?:{TECH}|[A-Za-z]+))*[()]*|v?\d+(?:\.\d+)+[\w.-]*|"
                        r"\d+(?:\.\d+)?(?:ms|s|secs?|mins?|h|hrs?|hours?|d|days?|w|weeks?|mo|months?|y|years?|"
                        r"chars?|characters|b|bytes?|kb|mb|gb|bits?|k|m|x|px|st|nd|rd|th|%)|"
                        r"(?:/|~/|\./|\.\./)\S*|[a-z][a-z0-9+.-]*://\S*|[^@\s]+@[\w-]+(?:\.[\w-]+)+)", re.IGNORECASE)
# After `=` or `:`, code rather than a literal (as ASSIGNED reads it): a call, an index, a format field, an
# attribute (`token = token[:-1]`, `password = base64.b16encode(x)`, `{password!r}`).
CODE = re.compile(r"[(\[{]|[A-Za-z_]\.[A-Za-z_]")
DIGITS_NAMES = ("pin", "pass", "code")  # names whose value may be digits alone: a PIN, a passcode, a password
CAMEL_WORDS = re.compile(r"[a-z]*(?:[A-Z][a-z]{2,})+")  # JavaScriptObjectNotation: words, not a random key


# What each pattern needs somewhere in the text before it is worth running (a substring test is a hundred times
# faster than the patterns, and most turns hold none of these): a whole session is redacted at megabytes a second.
NEEDS = ((PEM, ("PRIVATE KEY",)), (URL_PASSWORD, ("://",)),
         (KEYS, ("sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "hooks.slack.com", "AKIA", "ASIA", "AIza",
                 "ya29.", "eyJ", "Bearer ")))
NAMED = ("pass", "pwd", "secret", "token", "key", "auth")
SAID = ("pass", "pwd", "secret", "token", "key", "pin", "code")
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
    if any(name in lowered for name in NAMED) and ("=" in text or ":" in text):
        text, count = _assignments(text, lowered)
        total, lowered = total + count, lowered if not count else text.lower()
    if any(name in lowered for name in SAID):
        text, count = _said(text, lowered)
        total += count
    return text, total


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


def _said(text: str, lowered: str) -> tuple[str, int]:
    """Each secret said in words (a credential's name, a connector, a value that looks like a secret) redacted;
    how many were. The names are found in the lowered text, as in `_assignments`."""
    found = CREDENTIAL.finditer(lowered) if len(lowered) == len(text) else re.finditer(CREDENTIAL.pattern, text,
                                                                                        re.IGNORECASE)
    out, last, count = [], 0, 0
    for name in found:
        start, end = name.span()
        if start < last or not _whole_word(text, start, end) or (name.group() == "pin" and text[start:end] != "PIN"):
            continue
        joined = CONNECTOR.match(text, end)
        value = _value_span(text, joined.end()) if joined else None
        if value is None or not _looks_secret(text[value[0]:value[1]], name.group(), joined.group("bare") is None) \
                or (joined.group("sign") and CODE.search(text[value[0]:value[1]])):
            continue
        out += [text[last:value[0]], REDACTED]
        last = value[1]
        count += 1
    return "".join(out) + text[last:], count


def _whole_word(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is a word of its own: no letter, digit or joiner on either side."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() or before in "_-.$/") and not (after.isalnum() or after in "_-")


def _value_span(text: str, start: int) -> tuple[int, int] | None:
    """Where the value that starts at `start` is: inside its quotes, or its run of characters less the sentence's
    own punctuation at its end (see the module); None when nothing is left."""
    run = VALUE.match(text, start)
    if run is None:
        return None
    begin, end = run.span()
    opener = text[begin]
    if opener in OPENERS:  # quoted: to its closing quote on the line ('Hunter2 Secret'), or the run without it
        closer = CLOSERS[OPENERS.index(opener)]
        line_end = text.find("\n", begin)
        inside = text.find(closer, begin + 1, min(begin + 202, len(text) if line_end < 0 else line_end))
        begin, end = begin + 1, (inside if inside > begin + 1 else end)
    while end > begin and text[end - 1] in SENTENCE_END and not _closes(text[begin:end]):
        end -= 1
    return (begin, end) if end > begin else None


def _closes(value: str) -> bool:
    """Whether the value's last character closes a bracket the value itself opened (`Hunter(2)`)."""
    pairs = {")": "(", "]": "["}
    last = value[-1]
    return last in pairs and value.count(pairs[last]) >= value.count(last)


def _looks_secret(value: str, name: str, connected: bool = True) -> bool:
    """Whether a value said after a credential's name looks like a secret: mixed letters and digits or symbols,
    6 characters or more, and not words, a placeholder or a technical name (see NOT_SECRET); digits alone only
    after a PIN, a passcode or a password (4 or more for a PIN or a code, 6 for a password). A value not
    `connected` by a word or a sign ("with password X") needs a digit."""
    if value.startswith(REDACTED) or len(value) > 200 or PLACEHOLDER.fullmatch(value):
        return False
    if any(c.isspace() for c in value):  # words in quotes: a passphrase's, not a token's ('expired at 12:00')
        return connected and "pass" in name and _looks_secret("".join(value.split()), name)
    if value.isdigit():
        digits_ok = any(part in name for part in DIGITS_NAMES)
        return digits_ok and len(value) >= (6 if "word" in name or name == "passwd" else 4)
    if connected and _random_letters(value):
        return True
    if len(value) < 6 or NOT_SECRET.fullmatch(value):
        return connected and "phrase" in name and value.count("-") >= 2 and len(value) >= 12  # correct-horse-...
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    symbols = any(c in SYMBOLS for c in value.rstrip("!?"))  # "wrong!", "right!?": a word said loud
    return (letters and digits) or ((letters or digits) and symbols and connected)


def _random_letters(value: str) -> bool:
    """Whether a value of letters alone is a random key's (16 or more, three capitals or more, not words run
    together as in `JavaScriptObjectNotation`)."""
    return value.isalpha() and len(value) >= 16 and sum(c.isupper() for c in value) >= 3 \
        and not CAMEL_WORDS.fullmatch(value)


def without_secrets(text: str) -> str:
    """`text` redacted (see `redact`), without the count."""
    return redact(text)[0]
