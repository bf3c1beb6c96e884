"""One OpenAI-compatible chat endpoint for the tests: a real HTTP server on 127.0.0.1 whose replies a test
scripts (the generator and distill's LLM stage talk to it as to any local model server)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_reply(text: str) -> tuple[int, bytes]:
    """A 200 answer of /v1/chat/completions holding `text` as the assistant's message."""
    return 200, json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}).encode()


def prompt_of(body: dict) -> str:
    """The prompt of a chat request: its first message's content."""
    return body["messages"][0]["content"]


class FakeEndpoint:
    """The server: `reply(body)` gives each POST's (status, payload); every request is kept (`requests`: path,
    headers, body) and every prompt (`prompts`). `close()` stops it."""

    def __init__(self, reply: Callable[[dict], tuple[int, bytes]]):
        self.requests: list[dict] = []
        self.prompts: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                outer.prompts.append(prompt_of(body))
                status, payload = reply(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
