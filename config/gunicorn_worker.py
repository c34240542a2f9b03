"""gunicorn's threaded worker (gthread), except that no thread waits for a client.

gthread hands every connection to a thread, which then reads the request head with a
blocking read: a client that sends half a request, or a long request line a byte at a
time, holds that thread for as long as it likes, and a few such clients hold them all
(docs/operating.md, "Production (docker/)"). Here the worker's main loop, which already
watches every connection with a selector, reads the head itself, without blocking:

- a connection (new, or kept alive after a response) gets a thread only once its head
  is complete (an empty line), or once it is longer than the request-line limit or
  HEAD_MAX_BYTES, for gunicorn's parser to refuse;
- a head not complete within HEAD_TIMEOUT_SECONDS of its first wait is closed, without
  ever having had a thread (nginx's client_header_timeout, in front, does the same);
- once a thread has the connection (the body, the response), each blocking read or write
  waits at most IO_TIMEOUT_SECONDS: a client that stops reading or sending mid-request
  loses the connection instead of keeping the thread;
- a connection closed after its answer (a refused request, `Connection: close`) lingers
  up to LINGER_SECONDS for the client to close its side, as gthread does (RFC 9112,
  9.6), but in the selector: gthread lingers in its main loop, blocking, so 20 refused
  clients that keep their connections open stopped a process for up to 40 s.

The body itself is still read by the thread, as the app asks for it: a slow body holds
a thread for up to IO_TIMEOUT_SECONDS per read. The buffering proxy in front
(docker/nginx/durable-runs.conf) receives whole bodies before it forwards them.

With TLS served by gunicorn itself (never in docker/: the proxy terminates it) the bytes
are encrypted, so this falls back to gthread's own handling.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import time
from collections import deque
from concurrent.futures import Future
from functools import partial
from typing import Any

from gunicorn.workers.gthread import TConn, ThreadWorker  # type: ignore[import-untyped]

HEAD_TIMEOUT_SECONDS = 10.0
IO_TIMEOUT_SECONDS = 30.0
# Well over any head a browser or client sends (cookies included), far under memory
# worries at gunicorn's worker_connections (1,000 a process).
HEAD_MAX_BYTES = 32 * 1024
LINGER_SECONDS = 2.0  # gunicorn.util.close_graceful's

log = logging.getLogger("gunicorn.error")


class ClientSocket(socket.socket):
    """A client's socket on which "blocking" means blocking for IO_TIMEOUT_SECONDS at
    most per call; the timeout surfaces as a reset connection (gunicorn then drops it
    quietly) after one line in the error log."""

    def setblocking(self, flag: bool) -> None:
        if flag:
            self.settimeout(IO_TIMEOUT_SECONDS)
        else:
            super().setblocking(False)

    def _timed_out(self, what: str) -> ConnectionResetError:
        try:
            peer = self.getpeername()
        except OSError:
            peer = "?"
        log.warning("closed a connection from %s: %s for %g s", peer, what, self.gettimeout())
        return ConnectionResetError(errno.ECONNRESET, f"client {what}")

    def recv(self, *args: Any) -> bytes:
        try:
            return super().recv(*args)
        except TimeoutError:
            raise self._timed_out("sent nothing") from None

    def send(self, *args: Any) -> int:
        try:
            return super().send(*args)
        except TimeoutError:
            raise self._timed_out("read nothing") from None

    def sendall(self, *args: Any) -> None:
        try:
            super().sendall(*args)
        except TimeoutError:
            raise self._timed_out("read nothing") from None


class HeadBufferingWorker(ThreadWorker):  # type: ignore[misc]
    """gthread, with request heads read by the main loop (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lingering: deque[TConn] = deque()

    def accept(self, listener: socket.socket) -> None:
        if self.cfg.is_ssl:
            return super().accept(listener)  # type: ignore[no-any-return]
        try:
            accepted, address = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return None
        self.nr_conns += 1
        client = ClientSocket(fileno=accepted.detach())
        conn = TConn(self.cfg, client, address, listener.getsockname())
        self.await_head(conn)
        return None

    def on_client_socket_readable(self, conn: TConn, client: socket.socket) -> None:
        """A kept-alive connection has the start of its next request: read its head
        here too."""
        if self.cfg.is_ssl:
            return super().on_client_socket_readable(conn, client)  # type: ignore[no-any-return]
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self.await_head(conn)
        return None

    def await_head(self, conn: TConn) -> None:
        conn.head = bytearray()
        conn.sock.setblocking(False)
        # gthread's pending connections: closed by murder_pending() once past
        # conn.timeout (all get the same span, so the deque stays in deadline order).
        conn.timeout = time.monotonic() + HEAD_TIMEOUT_SECONDS
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_head_readable, conn))

    def on_head_readable(self, conn: TConn, client: socket.socket) -> None:
        try:
            data = conn.sock.recv(HEAD_MAX_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            conn.head += data
            if not self.head_ready(conn.head):
                return
        self.poller.unregister(client)
        self.pending_conns.remove(conn)
        if not data:  # closed by the client
            self.nr_conns -= 1
            conn.close()
            return
        self.enqueue_req(conn)

    def head_ready(self, head: bytearray) -> bool:
        """Whether a thread should have it: complete, or already too long for the
        parser to accept (it refuses what is buffered: 414, 431 or 400)."""
        if b"\r\n\r\n" in head or len(head) >= HEAD_MAX_BYTES:
            return True
        line_limit = self.cfg.limit_request_line
        return bool(line_limit) and b"\r\n" not in head and len(head) > line_limit + 2

    def finish_request(self, conn: TConn, fs: Future[Any]) -> None:
        """A connection to close after its answer lingers in the selector."""
        if self.cfg.is_ssl or fs.cancelled() or fs.exception() is not None or fs.result():
            return super().finish_request(conn, fs)  # type: ignore[no-any-return]
        try:
            conn.sock.shutdown(socket.SHUT_WR)
            conn.sock.setblocking(False)
        except OSError:
            self.nr_conns -= 1
            conn.close()
            return None
        conn.timeout = time.monotonic() + LINGER_SECONDS
        self.lingering.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_linger, conn))
        return None

    def on_linger(self, conn: TConn, client: socket.socket) -> None:
        try:
            if conn.sock.recv(65536):
                return  # drained; the client may still close before the deadline
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        self.poller.unregister(client)
        self.lingering.remove(conn)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        super().murder_pending()
        now = time.monotonic()
        while self.lingering and self.lingering[0].timeout <= now:
            conn = self.lingering.popleft()
            try:
                self.poller.unregister(conn.sock)
            except (OSError, KeyError, ValueError):
                pass
            self.nr_conns -= 1
            conn.close()

    def handle(self, conn: TConn) -> Any:
        head = getattr(conn, "head", None)
        if head is not None:
            conn.head = None
            # Nothing to wait for: the head is here. The parser reads it first.
            conn.data_ready = True
            conn.sock.setblocking(True)
            conn.init()
            conn.parser.unreader.unread(bytes(head))
        return super().handle(conn)
