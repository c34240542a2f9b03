"""gunicorn's settings for the web process (docker/, and the tests that serve the app as
production does): `gunicorn -c python:config.gunicorn config.wsgi:application`.

Workers: GUNICORN_WORKERS processes of GUNICORN_THREADS threads, gthread with the
request head read by each process's main loop (config/gunicorn_worker.py). A thread
serves a request only once its head has arrived, so slow or silent clients cost a
socket each, never a thread: sync workers (one request a process) and plain gthread
(one connection a thread, read blocking) are both held by a handful of connections
that send half a request and then nothing (/healthz answered after 27-37 s; docs/operating.md).
Each thread keeps its own database connection (CONN_MAX_AGE): workers x threads of them.
The threads' PBKDF2 logins and pages share the process's GIL; workers add cores.

The request line is limited to 8190 bytes (gunicorn's own refusal, a plain 414, beyond
it). The app refuses a query string over MAX_QUERY_BYTES (4096) in its own words
(api/middleware.py) first, so every URL a client builds is answered by the app; and
the proxy in front (docker/nginx/durable-runs.conf) refuses longer lines itself.

Keep-alive: 75 s (nginx's own default towards browsers). A kept-alive connection waits
in the main loop, not a thread; a short keep-alive only makes clients that pause a
little between requests meet a closing connection (docs/performance.md). timeout is the
worker's heartbeat: a process whose main loop stops for that long is restarted.

Access log: the path without its query string, and no Referer (it carries the previous
page's query): a search value may be personal data, and the log keeps it otherwise even
with payload logging off. Last on the line, the X-Forwarded-For the proxy sent ("-"
without one): the client's address is its last entry.
"""

import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", "3"))
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
worker_class = "config.gunicorn_worker.HeadBufferingWorker"
keepalive = 75
timeout = 30
limit_request_line = 8190
# gunicorn 25+'s control socket (gunicornc: change the worker count, shut down) in
# $HOME/.gunicorn: nothing here uses it, and every gunicorn on a host (the tests start
# several) would share that one path.
control_socket_disable = True
accesslog = "-"
# gunicorn's default, with "%(m)s %(U)s %(H)s" (no query) for the request line, no
# Referer, and X-Forwarded-For last (behind the proxy %(h)s is the proxy's address).
access_log_format = (
    '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s "%(a)s" "%({x-forwarded-for}i)s"'
)


def post_worker_init(worker: object) -> None:
    """Import every URL's view now rather than at a worker's first request (about 0.5 s
    of imports), so that request is as fast as the rest."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018
