"""A webhook receiver for tests: a real HTTP server on 127.0.0.1 in a thread that
answers 500 to its first `failures` requests and `status` (200) after, or holds each
request until released (`hang`), and records every request it got."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    answered: int | None = None  # the status sent back; None: the sender hung up first

    @property
    def payload(self) -> dict[str, Any]:
        return dict(json.loads(self.body))


@dataclass
class Receiver:
    failures: int = 0
    status: int = 200
    hang: bool = False
    requests: list[Received] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def answer_for(self) -> int:
        with self.lock:
            failing = len(self.requests) <= self.failures
        return 500 if failing else self.status

    def successes(self) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.answered is not None and 200 <= r.answered < 300]

    def release(self) -> None:
        self.hang = False
        self.released.set()


@contextmanager
def receiver(**options: Any) -> Iterator[Receiver]:
    state = Receiver(**options)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got = Received(dict(self.headers.items()), body)
            with state.lock:
                state.requests.append(got)
            if state.hang:
                # The sender has given up by the time this is released: a 503, so it
                # is never counted as a delivery.
                state.released.wait(timeout=120)
                status = 503
            else:
                status = state.answer_for()
            # Recorded before the answer goes out: the sender may read it, and the test
            # look at this record, before this thread runs another line.
            got.answered = status
            try:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
            except OSError:  # the sender timed out and closed the connection
                got.answered = None

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
