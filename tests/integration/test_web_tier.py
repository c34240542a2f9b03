"""The web tier against slow clients (docs/operating.md): gunicorn started as production starts it
(`gunicorn -c python:config.gunicorn config.wsgi:application`, docker/), alone and behind
Debian's nginx with the shipped docker/nginx/durable-runs.conf.

Twenty slow connections (ten that send half a request and then nothing, ten that send a
long request line a little at a time) leave /healthz answering within a second, for as
long as they stay open. With the former settings (3 sync workers, no request-line
limit) /healthz did not answer within 90 s: each worker stayed with one slow client
until its 30 s timeout killed it, and the next took its place.
"""

from __future__ import annotations

import http.client
import os
import random
import socket
import sys
import time
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import RequestFactory, override_settings

from config.clientip import client_ip
from config.gunicorn_worker import HEAD_TIMEOUT_SECONDS
from runs.tools.processes import ChildProcess, stop_all
from tests.integration.servers import free_port
from tests.support.places import ROOT, database_url_for_tests
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SLOW = 10  # connections of each kind
ROUNDS = 5
NGINX = "/usr/sbin/nginx"  # Debian's package (.ci/run installs it)


def app_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url_for_tests(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "RUNS_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def answers(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except OSError:
        return False


def get(port: int, path: str, *, host: str = "127.0.0.1", source: str = "", **headers: str):
    """(status, body, seconds) of one request on a new connection."""
    began = time.monotonic()
    conn = http.client.HTTPConnection(
        host, port, timeout=10, source_address=(source, 0) if source else None
    )
    try:
        conn.request("GET", path, headers={"Connection": "close", **headers})
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    return response.status, body, time.monotonic() - began


@pytest.fixture
def gunicorn(tmp_path) -> Iterator[tuple[int, ChildProcess]]:
    """gunicorn as docker/ starts it (GUNICORN_BIND as the only change); its port."""

    def start(**extra: str) -> tuple[int, ChildProcess]:
        port = free_port()
        args = [sys.executable, "-m", "gunicorn", "-c", "python:config.gunicorn"]
        args.append("config.wsgi:application")
        env = app_env(GUNICORN_BIND=f"127.0.0.1:{port}", **extra)
        web = ChildProcess("gunicorn", args, env, tmp_path / f"gunicorn{port}.log")
        started.append(web)
        wait_for(lambda: answers(port), timeout=60, what="gunicorn", on_timeout=web.tail)
        return port, web

    started: list[ChildProcess] = []
    try:
        yield start
    finally:
        stop_all(started)


def open_slow_clients(port: int) -> list[socket.socket]:
    """SLOW connections with half a request, SLOW with the start of a long request line."""
    clients = []
    for _ in range(SLOW):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        clients.append(c)
    for _ in range(SLOW):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"GET /runs/?q=" + b"a" * 4000)
        clients.append(c)
    return clients


def still_open(c: socket.socket) -> bool:
    """Neither closed nor answered by the server."""
    try:
        return c.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def healthz_under_slow_clients(port: int) -> tuple[list[float], list[socket.socket]]:
    """/healthz's time, ROUNDS times, while the slow clients stay open and the long
    lines grow by 100 bytes a round (under the limit still)."""
    clients = open_slow_clients(port)
    seconds = []
    for _ in range(ROUNDS):
        for c in clients[SLOW:]:
            c.sendall(b"a" * 100)
        status, _, took = get(port, "/healthz")
        assert status == 200
        seconds.append(took)
    return seconds, clients


def test_twenty_slow_clients_leave_healthz_answering_within_a_second(gunicorn):
    port, _ = gunicorn()
    began = time.monotonic()

    seconds, clients = healthz_under_slow_clients(port)

    try:
        assert max(seconds) < 1.0, seconds
        assert all(still_open(c) for c in clients), "the server kept every slow client"
        # They cost a socket each, for HEAD_TIMEOUT_SECONDS at most: then closed.
        wait_for(
            lambda: not any(still_open(c) for c in clients),
            timeout=HEAD_TIMEOUT_SECONDS + 10,
            what="the slow clients to be closed",
        )
        assert time.monotonic() - began >= HEAD_TIMEOUT_SECONDS - 0.5
        assert get(port, "/healthz")[0] == 200
    finally:
        for c in clients:
            c.close()


def test_an_over_limit_request_line_is_refused_at_once_and_holds_nothing(gunicorn):
    port, _ = gunicorn()
    line = b"GET /runs/?q=" + b"a" * 8200
    held = []
    try:
        # Sent whole, then left open: refused (gunicorn's 414), nothing held.
        for _ in range(2 * SLOW):
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(line + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            held.append(c)
        for c in held:
            assert c.recv(64).startswith(b"HTTP/1.1 414 "), "refused"
        # Sent without its end: refused as soon as it is over the limit.
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        held.append(c)
        c.sendall(line)
        assert c.recv(64).startswith(b"HTTP/1.1 414 ")
        status, _, took = get(port, "/healthz")
        assert (status, took < 1.0) == (200, True), took
    finally:
        for c in held:
            c.close()
    # Under the limit, a query string over MAX_QUERY_BYTES is the app's to refuse, in the
    # API's words.
    status, body, _ = get(port, "/api/runs/?workflow=" + "x" * 5000)
    assert status == 400
    assert b'"invalid"' in body and b"at most 4096" in body


def test_the_access_log_has_the_path_without_the_query_string(gunicorn):
    port, web = gunicorn()

    status, _, _ = get(port, "/runs/?q=secret-search", Referer="http://127.0.0.1/?q=secret-ref")

    assert status == 302  # to the login page
    line = wait_for(
        lambda: next((x for x in web.output().splitlines() if '"GET /runs/ HTTP/' in x), None),
        timeout=10,
        what="the access log line",
        on_timeout=web.tail,
    )
    assert '"GET /runs/ HTTP/1.1" 302' in line
    assert "secret" not in web.output()


# --- behind nginx ----------------------------------------------------------------------


def nginx_binary() -> str:
    """Debian's nginx; without it the test is skipped, unless in CI, where it fails."""
    if os.path.exists(NGINX):
        return NGINX
    message = f"nginx not found at {NGINX}: `apt-get install nginx` to run these tests"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def nginx(tmp_path) -> Iterator[object]:
    """`nginx(upstream_port)`: Debian's nginx with docker/nginx/durable-runs.conf, two
    lines changed (where it listens, where `web` is); its port."""
    binary = nginx_binary()
    procs: list[ChildProcess] = []

    def start(upstream: int) -> int:
        port = free_port()
        shipped = (ROOT / "docker" / "nginx" / "durable-runs.conf").read_text()
        for old in ("listen 80;", "http://web:8000;", "/var/log/nginx/access.log"):
            assert shipped.count(old) == 1, f"{old!r} is no longer in the shipped file"
        conf = (
            shipped.replace("listen 80;", f"listen 127.0.0.1:{port};")
            .replace("http://web:8000;", f"http://127.0.0.1:{upstream};")
            .replace("/var/log/nginx/access.log", str(tmp_path / "nginx-access.log"))
        )
        (tmp_path / "durable-runs.conf").write_text(conf)
        temp = tmp_path / "nginx-temp"
        temp.mkdir(exist_ok=True)
        # What the image's /etc/nginx/nginx.conf has around conf.d/*.conf, in tmp_path.
        main = tmp_path / "nginx.conf"
        main.write_text(
            ("user root;\n" if os.geteuid() == 0 else "")
            + f"daemon off;\npid {tmp_path / 'nginx.pid'};\nworker_processes 1;\n"
            f"error_log {tmp_path / 'nginx-error.log'} info;\n"
            "events { worker_connections 1024; }\n"
            "http {\n"
            f"  client_body_temp_path {temp / 'body'};\n"
            f"  proxy_temp_path {temp / 'proxy'};\n"
            f"  fastcgi_temp_path {temp / 'fastcgi'};\n"
            f"  uwsgi_temp_path {temp / 'uwsgi'};\n"
            f"  scgi_temp_path {temp / 'scgi'};\n"
            f"  include {tmp_path / 'durable-runs.conf'};\n"
            "}\n"
        )
        args = [binary, "-p", str(tmp_path), "-c", str(main), "-e", "stderr"]
        proc = ChildProcess("nginx", args, dict(os.environ), tmp_path / f"nginx{port}.out")
        procs.append(proc)
        wait_for(lambda: answers(port), timeout=30, what="nginx", on_timeout=proc.tail)
        return port

    try:
        yield start
    finally:
        stop_all(procs)


def test_behind_nginx_slow_clients_never_reach_gunicorn_and_the_client_address_does(
    gunicorn, nginx, tmp_path
):
    net = f"127.{random.randrange(1, 250)}.{random.randrange(1, 250)}"
    upstream, web = gunicorn(TRUSTED_PROXY_COUNT="1")
    port = nginx(upstream)

    seconds, clients = healthz_under_slow_clients(port)
    try:
        assert max(seconds) < 1.0, seconds
        assert all(still_open(c) for c in clients), "nginx holds them"
    finally:
        for c in clients:
            c.close()

    # nginx appends the address it saw to what the client wrote in X-Forwarded-For; the
    # app, one proxy from the right (TRUSTED_PROXY_COUNT=1), reads that one.
    spoofed = {"X-Forwarded-For": "10.0.0.9"}
    assert get(port, "/healthz?q=secret", source=f"{net}.1", **spoofed)[0] == 200
    line = wait_for(
        lambda: next((x for x in web.output().splitlines() if "10.0.0.9" in x), None),
        timeout=10,
        what="gunicorn's access line",
        on_timeout=web.tail,
    )
    assert '"GET /healthz HTTP/1.0" 200' in line  # nginx to gunicorn: HTTP/1.0
    assert line.endswith(f'"10.0.0.9, {net}.1"'), line
    request = RequestFactory().get("/", HTTP_X_FORWARDED_FOR=f"10.0.0.9, {net}.1")
    with override_settings(TRUSTED_PROXY_COUNT=1):
        assert client_ip(request) == f"{net}.1"
    # nginx writes its access line once the request is finalized, which may come just
    # after the client has read the whole answer: wait for it rather than read once.
    access = tmp_path / "nginx-access.log"
    ours = wait_for(
        lambda: next((x for x in access.read_text().splitlines() if x.startswith(net)), None),
        timeout=10,
        what="nginx's access line",
        on_timeout=access.read_text,
    )
    assert ours.startswith(f"{net}.1 - - [") and '"GET /healthz HTTP/1.1" 200' in ours, ours
    assert "secret" not in access.read_text()
