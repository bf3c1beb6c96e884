"""Secrets redacted before anything is written: one fixture per well-known shape, and near misses that stay."""

from __future__ import annotations

import pytest

from palace_cli.core.secrets import REDACTED, redact, without_secrets

SHAPES = {
    "openai": "sk-proj-AbC123dEf456GhI789jKl012MnO345",
    "sk-live": "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e",
    "anthropic": "sk-ant-api03-Zx81Qw72Er63Ty54Ui45Op36",
    "stripe": "sk_live_51H8xYzAbCdEfGh12",
    "github": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "github-pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "gitlab": "glpat-xY12zAb34CdE56fGh78IjK",
    "slack": "xoxb-1234567890-0987654321-AbCdEfGhIjKl",
    "slack-webhook": "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "google": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "google-oauth": "ya29.a0AfH6SMBx1234567890abcdefghij",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
    "bearer": "Bearer abcDEF1234567890ghijklmnop",
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_is_redacted(name):
    secret = SHAPES[name]
    text, count = redact(f"Use {secret} for the staging deploy.")
    assert count == 1 and REDACTED in text and secret.split()[-1] not in text
    assert text.startswith("Use ") and text.endswith(" for the staging deploy.")


def test_a_pem_private_key_is_redacted_whole():
    key = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
           "AAAAAAABAAAAMwAAAAtzc2gtZWQyNTUxOQAAACB1\n-----END OPENSSH PRIVATE KEY-----")
    text, count = redact(f"My key:\n{key}\nThanks.")
    assert (text, count) == (f"My key:\n{REDACTED}\nThanks.", 1)
    cut, _ = redact("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1234567890abcdef\n")  # pasted without its end
    assert "MIIEpAIBAAKCAQEA" not in cut


@pytest.mark.parametrize("text, shown", [
    ("postgres://app:s3cr3t-pw@db.internal:5432/prod", f"postgres://app:{REDACTED}@db.internal:5432/prod"),
    ("git clone https://x-access-token:hunter22@github.com/a/b", f"git clone https://x-access-token:{REDACTED}@github.com/a/b"),
    ("password=hunter22", f"password={REDACTED}"),
    ("export DB_PASSWORD=changeme123.", f"export DB_PASSWORD={REDACTED}."),
    ('{"api_key": "abcd1234efgh"}', f'{{"api_key": "{REDACTED}"}}'),
    ("secret_key = 'x9!kd83jd'", f"secret_key = '{REDACTED}'"),
    ("pwd: abc123xyz", f"pwd: {REDACTED}"),
])
def test_passwords_in_urls_and_assignments(text, shown):
    assert redact(text) == (shown, 1)


@pytest.mark.parametrize("text", [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",     # a hex commit hash
    "request 123e4567-e89b-12d3-a456-426614174000 timed out",       # a UUID
    "we moved from sk-learn (scikit-learn) to sk-learn-contrib-package",  # `sk-` in prose
    "see https://example.com:8080/path and https://user@host/x",    # URLs without a password
    "set `password=` in palace.toml to the name of the variable",   # the setting's name, no value
    "password: the account's password, kept in the vault",          # prose after a colon
    "token: optional",                                              # a plain word after a colon
    "--password=PASSWORD or password=<your password> or token=${API_TOKEN} or pwd=$PGPASS",  # placeholders
    "token = load_token() and password = form.password.data",       # code, not a literal
    "max_tokens=160000, auth_header=Bearer",                        # other names; no token after Bearer
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
])
def test_near_misses_stay(text):
    assert redact(text) == (text, 0)


def test_private_spans_are_dropped():
    assert redact("keep <private>my plan\nover lines</private> this") == ("keep  this", 1)
    assert redact("keep <PRIVATE>never closed") == ("keep ", 1)
    assert without_secrets("") == "" and redact("plain words") == ("plain words", 0)


# A near miss for each shape above: its prefix in prose, too short, no digit where a key has them, or one part of
# several; each must stay as it is (a redacted commit hash or word would break what people wrote).
NEAR = {
    "openai": "the sk-learning-rate-scheduler-module and sk-abc123",
    "sk-live": "a sk-live-demo key",
    "anthropic": "keys begin sk-ant- and then a long random part",
    "stripe": "Stripe keys look like sk_live_... or sk_test_abc",
    "github": "ghp_abc123 is too short to be a token",
    "github-pat": "tokens start with github_pat_ and then 82 characters",
    "gitlab": "glpat-short",
    "slack": "xoxb-12345 and xoxb-",
    "slack-webhook": "post to https://hooks.slack.com/services/T000/B000",
    "aws": "AKIA1234 and AKIAIOSFODNN7EXAMPLEXY and akiaiosfodnn7example",
    "google": "AIzaSyShort",
    "google-oauth": "ya29.short",
    "jwt": "the header eyJhbGciOiJIUzI1NiJ9 alone",
    "bearer": "send Bearer <token> or Bearer abcdefghijklmnopqrstuvwxyz or Bearer $TOKEN",
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_near_miss_of_each_shape_stays(name):
    assert redact(NEAR[name]) == (NEAR[name], 0)


@pytest.mark.parametrize("text", [
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n-----END CERTIFICATE-----",
    "ssh://git@github.com:22/a/b.git and mailto:ada@example.com and http://localhost:8080/x@y",
])
def test_public_keys_certificates_and_addresses_stay(text):
    assert redact(text) == (text, 0)


# A secret said in words: a credential's name, a connector, a value that looks like one (core/secrets.py `_said`).
SAID = "Tr0ub4dor&3xyz"


@pytest.mark.parametrize("text, shown", [
    (f"ok also the redis password is {SAID} and my github token ghp_0123456789abcdefghijABCDEFGHIJ012345",
     f"ok also the redis password is {REDACTED} and my github token {REDACTED}"),
    (f"We decided to use Redis with password {SAID} for the session cache, because Memcached cannot persist.",
     f"We decided to use Redis with password {REDACTED} for the session cache, because Memcached cannot persist."),
    (f"The admin password was {SAID}.", f"The admin password was {REDACTED}."),
    (f"the Redis password's {SAID} now", f"the Redis password's {REDACTED} now"),
    (f"the password is now set to {SAID}", f"the password is now set to {REDACTED}"),
    (f"I changed the password to {SAID}, tell Ada", f"I changed the password to {REDACTED}, tell Ada"),
    (f"the password was reset to {SAID} yesterday", f"the password was reset to {REDACTED} yesterday"),
    (f"I rotated the token, and changed it to {SAID}", f"I rotated the token, and changed it to {REDACTED}"),
    (f"the password for the staging db is {SAID}", f"the password for the staging db is {REDACTED}"),
    (f"Passphrase: '{SAID}'", f"Passphrase: '{REDACTED}'"),
    (f'the wifi password is "{SAID}".', f'the wifi password is "{REDACTED}".'),
    (f"**Password**: `{SAID}`", f"**Password**: `{REDACTED}`"),
    (f"the client secret -> {SAID}", f"the client secret -> {REDACTED}"),
    ("my api key is 9f8e7d6c5b4a3f2e1d0c", f"my api key is {REDACTED}"),
    ("the secret key is abc123def456 (rotate it)", f"the secret key is {REDACTED} (rotate it)"),
    ("the access token is AbCdEfGhIjKlMnOpQrSt.", f"the access token is {REDACTED}."),  # letters, at random
    ("I changed the PIN to 4821.", f"I changed the PIN to {REDACTED}."),
    ("the password is 83920174", f"the password is {REDACTED}"),
    ("the passphrase is correct-horse-battery-staple.", f"the passphrase is {REDACTED}."),
    ("set the password to Summer2024! and tell no one", f"set the password to {REDACTED} and tell no one"),
    ("the password (P@ssw0rd!) works", f"the password ({REDACTED}) works"),
])
def test_a_secret_said_in_words_is_redacted(text, shown):
    assert redact(text) == (shown, shown.count(REDACTED))


@pytest.mark.parametrize("text, shown", [
    ("password=Hunter2Secret!", f"password={REDACTED}"),                  # the ! was left out: one letter leaked
    ("password=Hunter2Secret!!", f"password={REDACTED}"),
    ("the password is Hunter2Secret!", f"the password is {REDACTED}"),
    ("the password is Hunter2Secret.", f"the password is {REDACTED}."),   # a sentence's period is the sentence's
    ("the password is Hunter2Secret?", f"the password is {REDACTED}?"),
    ("is the password Hunter2Secret, or not", f"is the password {REDACTED}, or not"),
    ("(the password is Hunter2Secret).", f"(the password is {REDACTED})."),
    ("the password is Hunter(2)Secret", f"the password is {REDACTED}"),   # brackets it opened are its own
    ("the password is 'Hunter2 Secret' now", f"the password is '{REDACTED}' now"),  # a passphrase in quotes
    ("the token is 'expired at 12:00' now", "the token is 'expired at 12:00' now"),  # a token's is one word
])
def test_the_value_ends_where_its_characters_end_less_the_sentence(text, shown):
    assert redact(text)[0] == shown


# What notes and docs about passwords and tokens say, none of it a secret: each must survive intact.
POLICY = [
    "the password is stored in Vault",
    "password reset flow",
    "the token expires after an hour",
    "passwords must be 12 characters",
    "Passwords must be at least 12 characters, with 1 digit and 1 symbol (!@#$%).",
    "The password is hashed with bcrypt before it is stored.",
    "the password is SHA256-hashed and salted",
    "Tokens are signed with HS256; the token is HS256-signed and base64-encoded.",
    "the token is valid for 3600s, then the refresh token is used",
    "The API key is sent in the X-Api-Key header, never in the URL.",
    "password: min 12 chars, one of each class",
    "the secret is mounted at /var/run/secrets/app and read at start",
    "Set the secret to the value of AWS_SECRET_ACCESS_KEY in CI.",
    "the password is wrong! try again",
    "and are not giving anybody else the username and password (_right!?_).",
    "Never use a password like password123 or qwerty.",
    "The default password is changeme; change it on first login.",
    "the PIN is 4 digits and the passcode 6",
    "max_tokens=160000 and 4096 tokens of context; the token 50256 ends a text",
    "I sent the password to ada2@example.com by Signal",
    "pwd is /home/me/code2 in that shell",
    "The token is a JWT (RS256) in the Authorization header.",
    "the password for the account is kept in 1Password",
    "the secret to good caching is a TTL2 policy? no: TTLs",
    "The token is compared with `==`, which is not constant-time.",
    "the password manager syncs every 15min",
    "the access key ID is shown once; the secret access key is in the vault",
    "a pin 13 drives the LED and pin code reviews are weekly",
]


@pytest.mark.parametrize("text", POLICY)
def test_notes_about_passwords_and_tokens_stay(text):
    assert redact(text) == (text, 0)
