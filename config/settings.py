"""Settings, read from the environment (docs/operating.md#settings).

DATABASE_URL, CELERY_BROKER_URL, SECRET_KEY, DEBUG, ALLOWED_HOSTS configure a
deployment; the RUNS_* variables tune the engine (lease length, sweep interval) and
exist mostly so tests can make time pass quickly.
"""

import math
import os
from datetime import timedelta
from pathlib import Path

import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured
from kombu.entity import Queue

from config.database import default_database

# Django's generic classes subscriptable at run time as django-stubs types them
# (admin.ModelAdmin[Schedule]); it adds __class_getitem__ and nothing else.
django_stubs_ext.monkeypatch()

# The folder that holds manage.py, templates/ and static/: the checkout, or where the
# production image puts them beside the installed package (DURABLE_RUNS_HOME=/app,
# docker/install.sh), since the package itself lives in site-packages there.
BASE_DIR = Path(os.environ.get("DURABLE_RUNS_HOME") or Path(__file__).resolve().parent.parent)
# Local state of `make up` (embedded servers, services.env, static files); a test or a
# second checkout may move it. A relative path is relative to the repository root.
VAR_DIR = BASE_DIR / (os.environ.get("DURABLE_RUNS_VAR") or "var")


def _services_env() -> dict[str, str]:
    """Addresses of the embedded servers and the development SECRET_KEY while `make up`
    runs (scripts/stack.py writes var/services.env and removes it on exit), so that
    management commands in a second shell reach the running stack without exporting
    anything."""
    path = VAR_DIR / "services.env"
    if not path.exists():
        return {}
    pairs = (line.partition("=") for line in path.read_text().splitlines() if "=" in line)
    return {key: value for key, _, value in pairs}


for _key, _value in _services_env().items():
    if not os.environ.get(_key):
        os.environ[_key] = _value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """A whole number of at least `minimum`, or one clear line naming the variable."""
    value = (os.environ.get(name) or "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ImproperlyConfigured(
            f"{name} must be a whole number of at least {minimum}, not {value!r}"
        )
    return number


def env_positive(name: str, default: float) -> float:
    """A number above 0, or one clear line naming the variable."""
    value = (os.environ.get(name) or "").strip()
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0:
        raise ImproperlyConfigured(f"{name} must be a number above 0, not {value!r}")
    return number


def _trusted_proxy_count() -> int:
    """TRUSTED_PROXY_COUNT, or API_NUM_PROXIES (its former name, still read)."""
    count = env_int("TRUSTED_PROXY_COUNT", -1)
    former = env_int("API_NUM_PROXIES", -1)
    if count >= 0 and former >= 0 and count != former:
        raise ImproperlyConfigured(
            f"TRUSTED_PROXY_COUNT={count} and API_NUM_PROXIES={former} disagree: set only "
            "TRUSTED_PROXY_COUNT (API_NUM_PROXIES is its former name)"
        )
    return max(count, former, 0)


DEBUG = env_bool("DEBUG", False)
# No public fallback: sessions, CSRF tokens and password resets are signed with it.
# `make up` generates one (var/secret_key), `make test` sets a test key, docker/ requires it.
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set and DEBUG is off: "
            "set SECRET_KEY to a long random string, or DEBUG=1 for development"
        )
    SECRET_KEY = "django-insecure-development-only"  # `check --deploy` flags this prefix
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
    if h.strip()
]

INSTALLED_APPS = [
    # Django's admin, answering a signed-in user who is not staff with why not.
    "config.apps.AdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "template_partials",
    "axes",
    "rest_framework",
    "knox",  # API tokens: hashed, expiring, several per user (api/authentication.py)
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI as static files: the API docs need no CDN
    "runs",
    "reconciliation",
    "api",
    "examples",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Refuses an API request whose body is over API_MAX_BODY_BYTES before anything reads it.
    "api.middleware.QueryLengthLimitMiddleware",
    "api.middleware.BodySizeLimitMiddleware",
    # Static files (htmx included) are served by the app itself: no CDN, no extra server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication: log lines of a request carry its id and its user.
    "config.requestlog.RequestContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Ends an idle login (and says so on the login page: after the messages).
    "runs.pages.sessions.SessionLifetimeMiddleware",
    # After a request that may have written: the primary's WAL position, so that this
    # client reads the primary until a replica has replayed it (runs/pages/replica.py).
    "runs.pages.replica.WrittenPositionMiddleware",
    # Nothing shown to a signed-in user is kept by a browser or proxy cache.
    "config.security.PrivateResponsesMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A page or a part of it, by the htmx headers: answers say so (Vary).
    "config.security.VaryOnHtmxMiddleware",
    "config.security.ContentSecurityPolicyMiddleware",
    # Last, as django-axes asks: it answers a locked-out login attempt itself.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "runs.pages.layout.layout",
            ],
            # The site's template tags (`{% load durable %}`) live with the rest of the
            # web code, not in an app's templatetags package.
            "libraries": {"durable": "runs.web.templatetags"},
        },
    }
]

# A server that does not answer fails a connection in seconds (readiness checks, workers
# waiting out a PostgreSQL restart), not after the operating system's TCP timeout.
RUNS_DB_CONNECT_TIMEOUT_SECONDS = env_float("RUNS_DB_CONNECT_TIMEOUT_SECONDS", 5.0)
# A worker cut off from the network keeps its session, its open transaction and the
# claim key it locked until PostgreSQL notices: TCP keepalives (both ends) notice a dead
# peer within about a minute, and a transaction left idle longer than any transactional
# effect may take is ended by the server (runs/engine/attempts/claims.py bounds the wait of
# whoever needs that key meanwhile).
RUNS_IDLE_IN_TRANSACTION_SECONDS = env_float("RUNS_IDLE_IN_TRANSACTION_SECONDS", 300.0)
# Sent at connection start, except through a pooler (config/database.py).
_server_options = [
    f"-c idle_in_transaction_session_timeout={int(RUNS_IDLE_IN_TRANSACTION_SECONDS * 1000)}",
    "-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3",
    # Only the engine's own statements are prepared (runs/sql/prepared.py), all looked up
    # by key: one generic plan each, never planned again per execution.
    "-c plan_cache_mode=force_generic_plan",
]
# DATABASE_POOLER=pgbouncer (or `?pooler=pgbouncer` in DATABASE_URL): DATABASE_URL names
# a PgBouncer in transaction mode (docs/operating.md, "PgBouncer").
DATABASES = {
    "default": default_database(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/durable_runs"),
        pooler=os.environ.get("DATABASE_POOLER"),
        server_options=_server_options,
        connect_timeout=max(1, int(RUNS_DB_CONNECT_TIMEOUT_SECONDS)),
    )
}
# DATABASE_REPLICA_URL: a streaming replica of DATABASE_URL's server, read by the reading
# pages and the read-only API (runs/sql/routing.py; docs/operating.md, "A read replica").
if os.environ.get("DATABASE_REPLICA_URL"):
    DATABASES["replica"] = default_database(
        os.environ["DATABASE_REPLICA_URL"],
        pooler=os.environ.get("DATABASE_REPLICA_POOLER"),
        server_options=_server_options,
        connect_timeout=max(1, int(RUNS_DB_CONNECT_TIMEOUT_SECONDS)),
    )
    # Tests read the replica alias from the default test database.
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
DATABASE_ROUTERS = ["runs.sql.routing.Router"]
# After failing to reach the replica, pages read the primary for this long before the
# replica is tried again.
RUNS_REPLICA_RETRY_SECONDS = env_positive("RUNS_REPLICA_RETRY_SECONDS", 5.0)
# A page read from the replica says "as of N s ago" when the replica is this far behind.
RUNS_REPLICA_LAG_SHOWN_SECONDS = env_float("RUNS_REPLICA_LAG_SHOWN_SECONDS", 0.2)
# How long a client that wrote keeps reading the primary at most, while the replica has
# not replayed that write (a replica that far behind is stale for everyone anyway).
RUNS_REPLICA_WRITTEN_COOKIE_SECONDS = env_positive("RUNS_REPLICA_WRITTEN_COOKIE_SECONDS", 300.0)
if os.environ.get("RUNS_TEST_DATABASE"):
    # tests/conftest.py names a test database per session, so concurrent test runs on
    # one server do not drop each other's database.
    DATABASES["default"]["TEST"] = {"NAME": os.environ["RUNS_TEST_DATABASE"]}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Django's validators, with a longer minimum than its default of 8: an operator's
# password alone (no second factor) lets its holder decide claims and cancel runs.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 12},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Serve straight from the app folders too, so `make up` needs no collectstatic step.
WHITENOISE_USE_FINDERS = True

# --- HTTPS (behind a TLS-terminating proxy) ----------------------------------
# HTTPS=1: redirect http to https (health and metrics paths excepted, for probes inside
# the network), secure cookies, HSTS. Behind a proxy that sets X-Forwarded-Proto, set
# SECURE_PROXY_SSL_HEADER=1 so Django knows a request came in over https.
HTTPS = env_bool("HTTPS", False)
if HTTPS:
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(env_float("SECURE_HSTS_SECONDS", 31536000))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]
# Reverse proxies in front of the web process that append to X-Forwarded-For: the
# client's address is read from that header (config/clientip.py) for login throttling
# and the API's throttle, and never trusted when this is 0. Behind a proxy, 0 makes
# every client one address.
TRUSTED_PROXY_COUNT = _trusted_proxy_count()

# --- Health and metrics ----------------------------------------------------------
# /readyz and `manage.py check_health` give each dependency this long to answer.
RUNS_HEALTH_TIMEOUT_SECONDS = env_float("RUNS_HEALTH_TIMEOUT_SECONDS", 3.0)
# /metrics answers a request that carries `Authorization: Bearer <METRICS_TOKEN>` (when
# set), or, with no proxy in front (TRUSTED_PROXY_COUNT 0, no forwarding headers), comes
# from one of METRICS_ALLOWED_NETWORKS (comma-separated CIDRs; default this host only).
# Everyone else gets 403. The token also shows /readyz's error details.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_ALLOWED_NETWORKS = [
    n.strip()
    for n in os.environ.get("METRICS_ALLOWED_NETWORKS", "127.0.0.1/32,::1/128").split(",")
    if n.strip()
]
# A worker serves its own metrics (all its processes) on this port; unset: none.
RUNS_WORKER_METRICS_PORT = int(os.environ.get("RUNS_WORKER_METRICS_PORT") or 0)
RUNS_WORKER_METRICS_ADDR = os.environ.get("RUNS_WORKER_METRICS_ADDR") or "127.0.0.1"

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"
SESSION_COOKIE_HTTPONLY = True
# A login ends SESSION_ABSOLUTE_HOURS after it began, and after SESSION_IDLE_MINUTES
# without a request from the person (the pages' own polling does not count):
# runs/pages/sessions.py.
SESSION_ABSOLUTE_HOURS = env_positive("SESSION_ABSOLUTE_HOURS", 12.0)
SESSION_IDLE_MINUTES = env_positive("SESSION_IDLE_MINUTES", 30.0)
SESSION_COOKIE_AGE = max(1, int(SESSION_ABSOLUTE_HOURS * 3600))
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from <body hx-headers>, not the cookie

# --- Single sign-on (runs/web/sso.py; docs/operating.md#single-sign-on) -----------
# OpenID Connect, off unless OIDC_ISSUER is set; then OIDC_CLIENT_ID and
# OIDC_CLIENT_SECRET are required and OIDC_ROLE_GROUPS (`role=group,...`) says which
# of the provider's groups give which role (config/checks.py says what is wrong at
# startup). The endpoints are read from the issuer's discovery document at the first
# sign-in, not here. LOCAL_LOGIN=0 turns the username and password form off (pages and
# /admin/); API tokens work either way.
OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "").strip()
OIDC_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "").strip()
OIDC_CLIENT_SECRET = os.environ.get("OIDC_CLIENT_SECRET", "")
OIDC_SCOPES = os.environ.get("OIDC_SCOPES", "").strip() or "openid email profile groups"
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "").strip() or "groups"
OIDC_USERNAME_CLAIM = os.environ.get("OIDC_USERNAME_CLAIM", "").strip() or "preferred_username"
OIDC_ROLE_GROUPS = os.environ.get("OIDC_ROLE_GROUPS", "")
OIDC_PROVIDER_NAME = os.environ.get("OIDC_PROVIDER_NAME", "").strip() or "single sign-on"
OIDC_TIMEOUT_SECONDS = env_positive("OIDC_TIMEOUT_SECONDS", 10.0)
# How far the provider's clock and ours may disagree on an ID token's times.
OIDC_LEEWAY_SECONDS = env_int("OIDC_LEEWAY_SECONDS", 60)
LOCAL_LOGIN = env_bool("LOCAL_LOGIN", True)
# mozilla-django-oidc's own names for what its views read (the endpoints and the client
# are read at each use by runs/web/sso.py, not from these).
OIDC_RP_SCOPES = OIDC_SCOPES
OIDC_USE_PKCE = True
# client_secret_basic: the token endpoint authentication every provider must accept.
OIDC_TOKEN_USE_BASIC_AUTH = True
OIDC_STORE_ID_TOKEN = True  # the hint of the provider's logout (runs/web/accounts.py)
OIDC_TIMEOUT = OIDC_TIMEOUT_SECONDS


def authentication_backends(local_login: bool) -> list[str]:
    """Without local login, no password is checked anywhere (an account signed in with a
    password before is signed out: its session's backend is gone)."""
    return [
        "axes.backends.AxesStandaloneBackend",
        *(["django.contrib.auth.backends.ModelBackend"] if local_login else []),
        # Acts only on the callback of a single sign-on; gives permissions as ModelBackend.
        "runs.web.sso.Backend",
    ]


AUTHENTICATION_BACKENDS = authentication_backends(LOCAL_LOGIN)

# Failed logins are throttled per client address (config/clientip.py), never per
# username alone, so nobody can lock an operator out from elsewhere (django-axes,
# runs/web/accounts.py): after AXES_FAILURE_LIMIT failures for one username from one
# address, or AXES_ADDRESS_FAILURE_LIMIT failures for any usernames from one address,
# that address waits AXES_COOLOFF_HOURS, and the login page says so
# (templates/accounts/locked_out.html). A success resets its own username's count only.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_ADDRESS_FAILURE_LIMIT = env_int("AXES_ADDRESS_FAILURE_LIMIT", 20, minimum=1)
AXES_COOLOFF_TIME = env_float("AXES_COOLOFF_HOURS", 0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HANDLER = "runs.web.accounts.LoginAttemptHandler"
AXES_CLIENT_IP_CALLABLE = "config.clientip.client_ip"
AXES_CLIENT_STR_CALLABLE = "runs.web.accounts.client_str"
AXES_LOCKOUT_CALLABLE = "runs.web.accounts.locked_out"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

# --- REST API (api/) ---------------------------------------------------------
# Token (`Authorization: Token …`, first: it names the scheme of a 401) and session
# authentication (DRF enforces CSRF for sessions). Tokens are django-rest-knox's: only
# their hash is stored, and each expires API_TOKEN_TTL_DAYS after `createoperator`
# made it (fixed when it is made: a later change applies to new tokens only).
# Permissions are the roles of runs/roles.py, per endpoint (api/permissions.py); deny by
# default.
# Throttling per user and per anonymous address; a request body over API_MAX_BODY_BYTES
# is refused with 413 before it is read.
API_MAX_BODY_BYTES = int(env_float("API_MAX_BODY_BYTES", 1024 * 1024))
API_TOKEN_TTL_MAX_DAYS = 3650


def token_ttl(value: str | None, default_days: float = 90) -> timedelta | None:
    """API_TOKEN_TTL_DAYS as knox's TOKEN_TTL: a number of days; 0 for tokens that never
    expire. Unset or empty is the default, as for every variable here: docker compose
    passes an unset variable as empty, which must not quietly mean "never"."""
    if value is None or not value.strip():
        return timedelta(days=default_days)
    try:
        days = float(value)
    except ValueError:
        days = math.nan
    if not 0 <= days <= API_TOKEN_TTL_MAX_DAYS:  # NaN fails this too
        raise ImproperlyConfigured(
            f"API_TOKEN_TTL_DAYS must be a number of days from 0 (never expire) to "
            f"{API_TOKEN_TTL_MAX_DAYS}, not {value!r}"
        )
    return timedelta(days=days) if days else None


REST_KNOX = {
    "TOKEN_TTL": token_ttl(os.environ.get("API_TOKEN_TTL_DAYS")),
    # The scheme the README, the OpenAPI description and WWW-Authenticate name.
    "AUTH_HEADER_PREFIX": "Token",
    # A token's expiry is fixed when it is made: using it does not extend it.
    "AUTO_REFRESH": False,
}
API_THROTTLE_USER = os.environ.get("API_THROTTLE_USER") or "1000/min"
API_THROTTLE_ANON = os.environ.get("API_THROTTLE_ANON") or "60/min"
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.JSONParser"],
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.UserThrottle", "api.throttling.AnonThrottle"],
    # The rates are read from API_THROTTLE_USER / API_THROTTLE_ANON at each request
    # (api/throttling.py); these are DRF's names for the same values.
    "DEFAULT_THROTTLE_RATES": {"user": API_THROTTLE_USER, "anon": API_THROTTLE_ANON},
    # The anonymous throttle counts per client address (config/clientip.py, through
    # api/throttling.py); DRF's name for the same count.
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "durable-runs API",
    "DESCRIPTION": (
        "Submit runs, follow them, and decide the effects whose outcome is unknown. "
        "Authenticate with `Authorization: Token <key>` or a session. A token comes from "
        "`manage.py createoperator NAME --token`, is shown once, and expires after "
        "API_TOKEN_TTL_DAYS (90 days by default); `--rotate-token` replaces a user's tokens "
        "with a new one, `--revoke-tokens` revokes them all. An expired or revoked token is "
        'refused with 401. Every 4xx answer is `{"error": {"code", "message", "fields"?}}`. '
        "No string in a request body or query may contain U+0000 (NUL), which PostgreSQL "
        "cannot store: it is refused (400), in a JSON value's strings and keys too."
    ),
    "VERSION": "0.1.0",
    "SCHEMA_PATH_PREFIX": "/api/",
    "TAGS": [
        {"name": "runs", "description": "Submit runs and follow them."},
        {"name": "claims", "description": "Decide the effects whose outcome is unknown."},
        {"name": "workflows", "description": "What can be submitted, with which input."},
        {"name": "pauses", "description": "Hold a workflow, or one step of it, from starting."},
    ],
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["api.permissions.AnyRole"],
    # Request and response bodies as separate components: read-only fields are not
    # asked for, required response fields are marked required.
    "COMPONENT_SPLIT_REQUEST": True,
    # drf-spectacular's default hook, then the links between operations and the body of
    # each workflow's submission (api/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.add_links",
        "api.schema.describe_submissions",
        "api.schema.describe_pauses",
        "api.schema.describe_batch_filter",
        "api.schema.forbid_nul",
    ],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "runs.states.RunStatus",
        "StepStatusEnum": "runs.states.StepStatus",
        "AttemptStatusEnum": "runs.states.AttemptStatus",
        "ClaimStatusEnum": "runs.states.ClaimStatus",
        "EffectKindEnum": "runs.states.EffectKind",
        # A batch is any operation; the API starts those on runs only.
        "BatchOperationEnum": "runs.states.BatchOperation",
        "RunBatchOperationEnum": "runs.states.RUN_OPERATION_CHOICES",
        "ErrorCodeEnum": "api.errors.CODES",
        "RunExportFormatEnum": "runs.record.export.FORMATS",
        "RunExportVersionEnum": "runs.record.export.VERSIONS",
    },
}


# The table of the database cache (CACHE_URL=db): made by api's migration 0002.
DATABASE_CACHE_TABLE = "durable_runs_cache"


def cache_from_broker(url: str, cache_url: str = "") -> dict[str, object]:
    """The cache every process shares: it holds the API's throttle counts, nothing else.

    CACHE_URL when set: a Redis URL (`redis://`, `rediss://`, `unix://PATH`,
    `redis+socket://PATH`), `db` for a table in PostgreSQL, or `memory` for each
    process's own memory (throttles then count per process only). Unset: the broker's
    Redis when the broker is one (the embedded `redis+socket://PATH` included), else the
    database, so that a RabbitMQ deployment needs no Redis and still throttles across
    every web process."""
    url = cache_url.strip() or url
    if url.startswith("redis+socket://"):
        url = "unix://" + url.removeprefix("redis+socket://").split("?", 1)[0]
    prefix = os.environ.get("API_CACHE_PREFIX") or "durable-runs"
    if url.startswith(("redis://", "rediss://", "unix://")):
        return {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            # Never clear() this cache: it may share the broker's database (FLUSHDB).
            "KEY_PREFIX": prefix,
        }
    if url == "memory":
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    if url == "db" or not cache_url.strip():
        return {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": DATABASE_CACHE_TABLE,
            "KEY_PREFIX": prefix,
            # One row per throttled user or address within its window: a cull (every
            # set past this many rows) must not forget live counts.
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        }
    raise ImproperlyConfigured(
        f"CACHE_URL must be a redis://, rediss://, unix:// or redis+socket:// URL, db or "
        f"memory, not {cache_url!r}"
    )


# --- Celery ---------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CACHES = {"default": cache_from_broker(CELERY_BROKER_URL, os.environ.get("CACHE_URL", ""))}
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("RUNS_QUEUE", "durable-runs")
# A message is acknowledged only after the task returns, and is requeued if the
# worker process dies: delivery may duplicate, never lose (the engine dedupes).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers keep their database connections (docs/performance.md#cost-shape). Celery's Django
# fixup closes
# every connection before and after every task unless told to reuse them: it then
# closes them only once per CELERY_DB_REUSE_MAX tasks. runs/tasks.py applies Django's
# own rule around each task instead (close_old_connections: CONN_MAX_AGE, health
# checks, a connection left broken by an error), as a web request would.
CELERY_DB_REUSE_MAX = int(env_float("CELERY_DB_REUSE_MAX", 100_000))
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Operator and recovery work (bulk operations, sweeps, probes, schedule ticks, the webhook
# outbox) goes on the control queue, `<RUNS_QUEUE>-recovery` (the name predates the
# batches on it; renaming it would strand the messages of running deployments); steps go
# on RUNS_QUEUE. Every worker consumes both, and the Redis transport alternates between
# them, so a control message waits for a free process and at most one step message per
# worker, not for the step queue's backlog (docs/operating.md#what-runs-where-and-why).
# A sweep that could not run within one interval expires: the next one does its work.
RUNS_SWEEP_INTERVAL = env_float("RUNS_SWEEP_INTERVAL", 15.0)
CELERY_RECOVERY_QUEUE = f"{CELERY_TASK_DEFAULT_QUEUE}-recovery"
CELERY_TASK_QUEUES = [
    Queue(name, routing_key=name) for name in (CELERY_TASK_DEFAULT_QUEUE, CELERY_RECOVERY_QUEUE)
]
CONTROL_TASKS = (
    "runs.process_batch",
    "runs.resume_batches",
    "runs.sweep",
    "runs.probe_claim",
    "runs.fire_schedules",
    "reconciliation.webhooks",
)
CELERY_TASK_ROUTES = {
    name: {"queue": CELERY_RECOVERY_QUEUE, "routing_key": CELERY_RECOVERY_QUEUE}
    for name in CONTROL_TASKS
}
# How often the beat looks for due schedule ticks (runs/engine/policies/schedules.py): the most a
# tick can be late. Ticks are exactly-once whatever the interval or number of beats.
RUNS_SCHEDULE_INTERVAL = env_float("RUNS_SCHEDULE_INTERVAL", 10.0)
CELERY_BEAT_SCHEDULE = {
    "recover-expired-attempts": {
        "task": "runs.sweep",
        "schedule": RUNS_SWEEP_INTERVAL,
        "options": {"expires": RUNS_SWEEP_INTERVAL},
    },
    "fire-schedules": {
        "task": "runs.fire_schedules",
        "schedule": RUNS_SCHEDULE_INTERVAL,
        "options": {"expires": RUNS_SCHEDULE_INTERVAL},
    },
}

# --- Engine ---------------------------------------------------------------
# A worker whose step's success makes exactly one step ready starts that step itself,
# in the finish's own transaction where it can (runs/engine/attempts/start.py,
# start_successor), else right after the commit, instead of a broker round trip, up to
# this many times per message (0: always publish). A worker that dies in between leaves
# the step to the sweeper (a lease to recover, or a queued step to republish after
# RUNS_REPUBLISH_AFTER_SECONDS), as a lost message would.
RUNS_DIRECT_SUCCESSORS = int(env_float("RUNS_DIRECT_SUCCESSORS", 20))
# The engine's per-step statements are prepared once per connection (runs/sql/prepared.py).
# Unset: yes, unless behind a pooler (DATABASE_POOLER, or seen on the connection); 1
# behind a PgBouncer that keeps them (docs/operating.md, "PgBouncer"); 0: never.
RUNS_PREPARED_STATEMENTS = (
    env_bool("RUNS_PREPARED_STATEMENTS", True)
    if os.environ.get("RUNS_PREPARED_STATEMENTS", "").strip()
    else None
)
# Default lease of an attempt; a step may declare its own. Renewed by ctx.heartbeat().
RUNS_LEASE_SECONDS = env_float("RUNS_LEASE_SECONDS", 60.0)
# How long one attempt of a step may run when the step declares no `timeout=`
# (docs/authoring.md#timeouts). Unset: each effect kind's own default
# (runs/engine/core/clock.KIND_TIMEOUTS). Past it the attempt is stopped (SIGALRM in
# the worker's process); RUNS_STEP_TIMEOUT_GRACE_SECONDS later, if the call ignored
# that, its worker process is replaced, as Celery's hard time limit does.
RUNS_STEP_TIMEOUT_SECONDS = (
    env_positive("RUNS_STEP_TIMEOUT_SECONDS", 300.0)
    if os.environ.get("RUNS_STEP_TIMEOUT_SECONDS", "").strip()
    else None
)
RUNS_STEP_TIMEOUT_GRACE_SECONDS = env_positive("RUNS_STEP_TIMEOUT_GRACE_SECONDS", 10.0)
# A worker's main process writes its heartbeat (runs/ops/heartbeat.py) this often, on a timer of
# its own, never per step; the workers page calls a worker silent once its last one is
# older than RUNS_LEASE_SECONDS. A worker silent for RUNS_WORKER_FORGET_SECONDS is
# dropped from the page when another worker starts.
RUNS_WORKER_HEARTBEAT_SECONDS = env_positive(
    "RUNS_WORKER_HEARTBEAT_SECONDS", max(0.2, min(RUNS_LEASE_SECONDS / 4, 15.0))
)
RUNS_WORKER_FORGET_SECONDS = env_positive("RUNS_WORKER_FORGET_SECONDS", 86400.0)
# A queued step whose newest message has not started an attempt within this bound of
# when it was due (queued_at; a retry's next_attempt_at; Step.message_due_at, set by a
# resume's countdowns and by the sweeper's own republish) is republished by the sweeper
# (the broker may have lost it): at most one message per step per bound.
RUNS_REPUBLISH_AFTER_SECONDS = env_float("RUNS_REPUBLISH_AFTER_SECONDS", 60.0)
# A sweep republishes no more steps than the broker's steps queue lacks for the steps
# waiting for a message (a queue holding one per step: none; they are merely slow).
# Off: it goes by the rows alone (the unit tests' session queue keeps every test's
# messages; tests/support/session_env.py).
RUNS_REPUBLISH_BACKOFF = env_bool("RUNS_REPUBLISH_BACKOFF", True)
# A message's countdown (a retry's delay, a probe's wait) is at most this long; a longer
# wait takes several messages (runs/engine/core/publish.py). Keep it below the broker's
# bound on a message held unacknowledged: Redis's visibility timeout (an hour by
# default), RabbitMQ's consumer_timeout (30 minutes by default).
RUNS_MAX_COUNTDOWN_SECONDS = env_positive("RUNS_MAX_COUNTDOWN_SECONDS", 600.0)
# A resume republishes the steps that waited behind its pause at this many messages a
# second (runs/engine/policies/pauses.py): the workers, and the system the pause
# protected, are not handed all of them at once.
RUNS_RESUME_RATE = env_positive("RUNS_RESUME_RATE", 50.0)
# A crashed guarded attempt is probed no earlier than its lease plus this grace: its
# worker may only be paused, with the external call still to land
# (docs/reliability.md#what-no-lease-can-fence).
RUNS_PROBE_GRACE_SECONDS = env_float("RUNS_PROBE_GRACE_SECONDS", 30.0)
# A probe holds its claim for this long (database clock), so make it longer than the
# slowest probe takes: a probe whose worker died or stalled past it is sent again by the
# sweeper, for at most RUNS_PROBE_MAX_TRIES tries in all; then the claim waits for the
# operator, with evidence that its probe never answered.
RUNS_PROBE_LEASE_SECONDS = env_float("RUNS_PROBE_LEASE_SECONDS", 60.0)
RUNS_PROBE_MAX_TRIES = max(1, int(env_float("RUNS_PROBE_MAX_TRIES", 3)))
# Internal, for `manage.py demo`'s own worker and beat: their sweeps (crashes, probes,
# republishes, timers, and a starting worker's resume of batches) touch only these runs
# (comma-separated ids), with the demo's short timings; unset, a sweep covers every run.
RUNS_SWEEP_ONLY_RUNS = [
    r.strip() for r in os.environ.get("RUNS_SWEEP_ONLY_RUNS", "").split(",") if r.strip()
]
# How long a transactional claim insert waits for a key another session holds open (a
# paused or partitioned worker) before the attempt gives way: it is deferred, retried
# after RUNS_CLAIM_BUSY_RETRY_SECONDS, and not counted against max_attempts.
RUNS_CLAIM_LOCK_TIMEOUT_SECONDS = env_float("RUNS_CLAIM_LOCK_TIMEOUT_SECONDS", 5.0)
RUNS_CLAIM_BUSY_RETRY_SECONDS = env_float("RUNS_CLAIM_BUSY_RETRY_SECONDS", 5.0)
# Modules that register workflows when Django starts; none unless named. The example
# workflows (examples.workflows) are for `make up`, `make demo`, the tests and the
# benches, which name them: a deployment runs only what it is told to, never examples
# any submitter could start (docs/operating.md#settings).
RUNS_WORKFLOW_MODULES = [
    m.strip() for m in os.environ.get("RUNS_WORKFLOW_MODULES", "").split(",") if m.strip()
]

# --- Reconciliation (operator side) ----------------------------------------
# An operator's take of a claim ("on it") expires after this many minutes unless renewed;
# queue rows unresolved for longer than RECONCILIATION_STALE_MINUTES are flagged stale;
# a decision over many claims previews what it does for its first RECONCILIATION_BULK_MAX
# claims (the decision itself takes up to reconciliation.decisions.MAX_CLAIMS).
RECONCILIATION_TAKE_MINUTES = env_float("RECONCILIATION_TAKE_MINUTES", 30.0)
RECONCILIATION_STALE_MINUTES = env_float("RECONCILIATION_STALE_MINUTES", 60.0)
RECONCILIATION_BULK_MAX = int(env_float("RECONCILIATION_BULK_MAX", 500))

# --- Webhook (reconciliation/webhooks.py; docs/operating.md#webhook) ----------------
# Off unless RUNS_WEBHOOK_URL is set: then the beat sends `reconciliation.webhooks` every
# RUNS_WEBHOOK_INTERVAL seconds, which writes one outbox row per new unresolved claim and
# per claim past RECONCILIATION_STALE_MINUTES, and POSTs the due ones, each signed with
# RUNS_WEBHOOK_SECRET (HMAC-SHA256). A failed try is retried after
# RUNS_WEBHOOK_BACKOFF_SECONDS, doubling with jitter up to RUNS_WEBHOOK_BACKOFF_MAX_SECONDS,
# for RUNS_WEBHOOK_MAX_TRIES tries in all; then the row is kept as failed. RUNS_PUBLIC_URL
# (this service's address as people reach it) makes the payload's link absolute.
RUNS_WEBHOOK_URL = os.environ.get("RUNS_WEBHOOK_URL", "").strip()
RUNS_WEBHOOK_SECRET = os.environ.get("RUNS_WEBHOOK_SECRET", "")
if RUNS_WEBHOOK_URL and not RUNS_WEBHOOK_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(
        f"RUNS_WEBHOOK_URL must be an http:// or https:// URL, not {RUNS_WEBHOOK_URL!r}"
    )
if RUNS_WEBHOOK_URL and len(RUNS_WEBHOOK_SECRET) < 16:
    raise ImproperlyConfigured(
        "RUNS_WEBHOOK_SECRET must be set (16 characters or more) when RUNS_WEBHOOK_URL is: "
        "receivers check each delivery's signature with it"
    )
RUNS_WEBHOOK_TIMEOUT_SECONDS = env_positive("RUNS_WEBHOOK_TIMEOUT_SECONDS", 5.0)
RUNS_WEBHOOK_INTERVAL = env_positive("RUNS_WEBHOOK_INTERVAL", 10.0)
RUNS_WEBHOOK_MAX_TRIES = env_int("RUNS_WEBHOOK_MAX_TRIES", 12, minimum=1)
RUNS_WEBHOOK_BACKOFF_SECONDS = env_positive("RUNS_WEBHOOK_BACKOFF_SECONDS", 10.0)
RUNS_WEBHOOK_BACKOFF_MAX_SECONDS = env_positive("RUNS_WEBHOOK_BACKOFF_MAX_SECONDS", 3600.0)
RUNS_PUBLIC_URL = os.environ.get("RUNS_PUBLIC_URL", "").strip().rstrip("/")

# --- Logs -----------------------------------------------------------------
# One JSON object per line in production (LOG_FORMAT=json, the default when DEBUG is
# off), plain text in development; both carry the request id and user of a web request,
# or the run id, step, attempt and worker of a step (runs/ops/logcontext.py). Step inputs,
# results and evidence are left out unless RUNS_LOG_PAYLOADS=1: they may hold personal
# data. Secrets are never logged.
LOG_FORMAT = (os.environ.get("LOG_FORMAT") or ("plain" if DEBUG else "json")).lower()
if LOG_FORMAT not in ("json", "plain"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or plain, not {LOG_FORMAT!r}")
RUNS_LOG_PAYLOADS = env_bool("RUNS_LOG_PAYLOADS", False)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "config.logs.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s%(context_text)s"},
        "json": {"()": "config.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # A failed login is logged once, by runs/web/accounts.py (the client's address and a
        # hash of the username); axes' own warnings would only repeat it.
        "axes": {"level": "ERROR"},
    },
}

# --- Bulk operations (runs/batches/) ----------------------------------------
# A batch whose items have not moved for this long (its worker died, its message was
# lost) gets a new message from beat's resume-batches, run every RUNS_BATCH_RESUME_INTERVAL
# seconds; a worker that starts resumes every unfinished batch at once.
RUNS_BATCH_STALL_SECONDS = env_float("RUNS_BATCH_STALL_SECONDS", 30.0)
RUNS_BATCH_RESUME_INTERVAL = env_float("RUNS_BATCH_RESUME_INTERVAL", 30.0)
CELERY_BEAT_SCHEDULE["resume-batches"] = {
    "task": "runs.resume_batches",
    "schedule": RUNS_BATCH_RESUME_INTERVAL,
    "options": {"expires": RUNS_BATCH_RESUME_INTERVAL},
}

# --- Retention (runs/engine/policies/retention.py) ------------------------------------
# No policy may keep claims and submission keys (its dedup window) for fewer days than
# this; a purge works in transactions of at most RUNS_RETENTION_BATCH rows, and beat
# starts one every RUNS_RETENTION_INTERVAL seconds.
RUNS_RETENTION_MIN_DEDUP_DAYS = int(env_float("RUNS_RETENTION_MIN_DEDUP_DAYS", 30))
RUNS_RETENTION_BATCH = int(env_float("RUNS_RETENTION_BATCH", 1000))
RUNS_RETENTION_INTERVAL = env_float("RUNS_RETENTION_INTERVAL", 3600.0)
CELERY_BEAT_SCHEDULE["apply-retention"] = {
    "task": "runs.apply_retention",
    "schedule": RUNS_RETENTION_INTERVAL,
    "options": {"expires": RUNS_RETENTION_INTERVAL},
}
if RUNS_WEBHOOK_URL:
    CELERY_BEAT_SCHEDULE["webhooks"] = {
        "task": "reconciliation.webhooks",
        "schedule": RUNS_WEBHOOK_INTERVAL,
        "options": {"expires": RUNS_WEBHOOK_INTERVAL},
    }
