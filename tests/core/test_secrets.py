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
