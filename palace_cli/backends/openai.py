"""A generator over any OpenAI-compatible /v1/chat/completions endpoint (llama-server, Ollama, vLLM, ...).

Standard library only (urllib): no SDK to install for one POST.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request

from palace_cli.errors import ModelError
from palace_cli.backends import Generator

DEFAULT_TIMEOUT = 120.0


def chat_url(url: str) -> str:
    """The chat-completions URL for a base URL given with or without /v1 or the full path."""
    base = url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ModelError(f"endpoint {url!r} is not an http(s) URL (e.g. http://127.0.0.1:8080)")
    if base.endswith("/chat/completions"):
        return base
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


class OpenAIGenerator(Generator):
    """Chat completions from an OpenAI-compatible HTTP endpoint; the prompt is one user message."""

    def __init__(self, url: str, model: str, *, api_key_env: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, seed: int | None = 0):
        if not model:
            raise ModelError("an endpoint needs a model name: set [models] endpoint_model in palace.toml")
        self.url = chat_url(url)
        self.model = model
        self.model_id = f"{model}@{self.url}"
        self.timeout = float(timeout)
        self.seed = seed
        self.api_key = None
        if api_key_env:
            self.api_key = os.environ.get(api_key_env)
            if not self.api_key:
                raise ModelError(f"the endpoint's API key is read from ${api_key_env}, which is not set")

    def complete(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: list[str] | None = None) -> str:
        """The endpoint's reply to `prompt` (the first choice's message content)."""
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "temperature": temperature, "stream": False}
        if stop:
            body["stop"] = list(stop)
        if self.seed is not None:
            body["seed"] = self.seed
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), headers=headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise ModelError(f"{self.url} answered HTTP {exc.code}: {_error_detail(exc)}") from None
        except (socket.timeout, TimeoutError):
            raise ModelError(f"{self.url} did not answer within {self.timeout:g} s "
                             "(raise [models] endpoint_timeout in palace.toml)") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise ModelError(f"{self.url} did not answer within {self.timeout:g} s "
                                 "(raise [models] endpoint_timeout in palace.toml)") from None
            raise ModelError(f"cannot reach {self.url}: {reason}; is the server running?") from None
        except OSError as exc:  # connection reset mid-answer and the like
            raise ModelError(f"{self.url}: connection failed: {exc}") from None
        return _content(self.url, raw)


def _content(url: str, raw: bytes) -> str:
    try:
        data = json.loads(raw)
        content = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        snippet = raw[:200].decode("utf-8", "replace")
        raise ModelError(f"{url}: not an OpenAI chat-completions answer: {snippet!r}") from None
    return (content or "").strip()


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """The server's own error message when it sent one, else the HTTP reason."""
    try:
        raw = exc.read()
    except OSError:
        raw = b""
    try:
        data = json.loads(raw)
        error = data.get("error", data)
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return str(message)[:300]
    except (ValueError, AttributeError):
        pass
    return raw[:200].decode("utf-8", "replace").strip() or str(exc.reason)
