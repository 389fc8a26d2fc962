"""Palimpsest settings: one module, every value from the environment with a safe local default."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from sessions_app.agent_mcp_rules import McpConfigError, mcp_servers_parse
from sessions_app.common.approvals import POLICIES, PolicyMapError, policy_map_check

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from exc


# ---------------------------------------------------------------------------
# Core. Production is the default; the local development defaults (DEBUG, a fixed key, local
# hosts, plain HTTP) are chosen explicitly with PALIMPSEST_DEV=1, which `make run` and the test
# settings set. docs/deploy.md lists the production environment.
# ---------------------------------------------------------------------------
PALIMPSEST_DEV = env_bool("PALIMPSEST_DEV", False)
DEBUG = env_bool("DEBUG", PALIMPSEST_DEV)
DEV_SECRET_KEY = "palimpsest-insecure-local-development-key-change-me"
SECRET_KEY = os.environ.get("SECRET_KEY", "") or (DEV_SECRET_KEY if PALIMPSEST_DEV else "")
if not SECRET_KEY or (SECRET_KEY == DEV_SECRET_KEY and not PALIMPSEST_DEV):
    raise ImproperlyConfigured(
        "Set SECRET_KEY (a long random string, see docs/deploy.md), or PALIMPSEST_DEV=1 for the local "
        "development defaults."
    )
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver" if PALIMPSEST_DEV else "")
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured("Set ALLOWED_HOSTS (the host names the service answers to, comma-separated).")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

# HTTPS, terminated by the reverse proxy in front of daphne (docs/deploy.md), which sets
# X-Forwarded-Proto. Off in local development (plain HTTP). /healthz answers over plain HTTP
# for the proxy's health checks.
_HTTPS = not PALIMPSEST_DEV
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("PALIMPSEST_BEHIND_PROXY", _HTTPS) else None
)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _HTTPS)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _HTTPS)
# HSTS is sticky in browsers: on only when the deployment says so (docs/deploy.md does).
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "template_partials",
    # django-ninja (the HTTP API): listed so that its docs page uses its own static files, no CDN.
    "ninja",
    "sessions_app",
    "memory_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before the CSRF check, the first to read a body: answer a body too large to read (the
    # API's as JSON, then the rest).
    "sessions_app.api.middleware.ApiBodyLimitMiddleware",
    "sessions_app.dashboard.middleware.RequestTooLargeMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

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
            ],
        },
    },
]

# ---------------------------------------------------------------------------
# Database: DATABASE_URL (PostgreSQL via psycopg 3, or a `sqlite:` URL), else the SQLite file
# PALIMPSEST_SQLITE_PATH. Whichever way SQLite is chosen, it gets the same options.
# ---------------------------------------------------------------------------
SQLITE_ENGINE = "django.db.backends.sqlite3"
SQLITE_OPTIONS = {
    # WAL lets readers (the dashboard, a second process) run while a turn writes; IMMEDIATE
    # takes the write lock at BEGIN so two writers queue instead of failing half-way with
    # "database is locked"; a writer waits up to `timeout` seconds for it. The fast path's raw
    # statements run on Django's own sqlite3 connection, so they wait as long.
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}
DATABASE_CONN_MAX_AGE = 600


def sqlite_database(name: str, options: dict | None = None) -> dict:
    """The SQLite database `name` with SQLITE_OPTIONS (`options`, from a URL's query, on top)."""
    return {
        "ENGINE": SQLITE_ENGINE,
        "NAME": name,
        "OPTIONS": {**SQLITE_OPTIONS, **(options or {})},
        "CONN_MAX_AGE": DATABASE_CONN_MAX_AGE,
        # Tests use a file too: several threads and processes (daphne) share it, which an
        # in-memory database cannot do without shared-cache table locks.
        "TEST": {"NAME": str(BASE_DIR / ".local" / "test-db.sqlite3")},
    }


def database_from_env(environ: Mapping[str, str]) -> dict:
    """The default database: DATABASE_URL's, else the SQLite file PALIMPSEST_SQLITE_PATH."""
    url = environ.get("DATABASE_URL", "")
    if not url:
        return sqlite_database(environ.get("PALIMPSEST_SQLITE_PATH", str(BASE_DIR / "db.sqlite3")))
    parsed = dj_database_url.parse(url, conn_max_age=DATABASE_CONN_MAX_AGE, conn_health_checks=True)
    if parsed.get("ENGINE") == SQLITE_ENGINE:
        return sqlite_database(str(parsed.get("NAME", "")), dict(parsed.get("OPTIONS") or {}))
    return dict(parsed)


DATABASES = {"default": database_from_env(os.environ)}
DATABASE_IS_SQLITE = DATABASES["default"]["ENGINE"] == SQLITE_ENGINE
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ---------------------------------------------------------------------------
# Channel layer: REDIS_URL switches from the in-memory layer to channels_redis.
# ---------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1500, "expiry": 60},
        }
    }
else:
    # One process: in memory, cleaning expired messages at most once a second.
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "sessions_app.fastpath.channel_layer.ThrottledInMemoryChannelLayer"}
    }

# ---------------------------------------------------------------------------
# Auth, static files, i18n
# ---------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# `collectstatic` writes here; in production the reverse proxy serves it at /static/ (docs/deploy.md).
STATIC_ROOT = Path(os.environ.get("PALIMPSEST_STATIC_ROOT", "") or BASE_DIR / "staticfiles")
# In local development daphne serves the static files itself (the dashboard has a handful); in
# production the proxy serves `collectstatic`'s output (1 makes daphne serve them anyway).
PALIMPSEST_SERVE_STATIC = env_bool("PALIMPSEST_SERVE_STATIC", PALIMPSEST_DEV)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "palimpsest": {"handlers": ["console"], "level": os.environ.get("PALIMPSEST_LOG_LEVEL", "INFO")},
        # The anthropic SDK's HTTP client logs a line at INFO for every model call (daphne's log
        # level is INFO): a line and a few percent of a turn's CPU each time, for nothing.
        "httpx2": {"level": os.environ.get("PALIMPSEST_HTTP_LOG_LEVEL", "WARNING")},
    },
}

# ---------------------------------------------------------------------------
# Palimpsest (PROTOCOL.md lists the public environment variables)
# ---------------------------------------------------------------------------
ANTHROPIC_API_KEY = os.environ.get("ANTHROPIC_API_KEY", "")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "") or None
# OpenAI's Chat Completions, or any compatible server (vLLM, Ollama, llama.cpp's) at the base URL.
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "") or None
# The openai provider streams its answers; 0 asks for each whole, for a server that cannot stream
# a tool call (llama-cpp-python's `--chat_format chatml-function-calling`, docs/real-model.md).
PALIMPSEST_OPENAI_STREAM = env_bool("PALIMPSEST_OPENAI_STREAM", True)
# The provider of a model that neither names one (`openai/...`) nor is in the built-in table.
# A provider is configured by its key or base URL, or by being named here; with none configured
# the scripted model answers every session (engine/providers/choice.py).
PALIMPSEST_PROVIDER = os.environ.get("PALIMPSEST_PROVIDER", "") or (
    "anthropic" if ANTHROPIC_API_KEY else "openai" if OPENAI_API_KEY or OPENAI_BASE_URL else "scripted"
)
if PALIMPSEST_PROVIDER not in {"anthropic", "openai", "scripted"}:
    raise ImproperlyConfigured("PALIMPSEST_PROVIDER must be 'anthropic', 'openai' or 'scripted'.")
PALIMPSEST_DEFAULT_MODEL = os.environ.get("PALIMPSEST_DEFAULT_MODEL", "") or (
    "gpt-4.1" if PALIMPSEST_PROVIDER == "openai" else "claude-sonnet-4-6"
)
# /metrics (Prometheus; docs/operations.md): a staff login, or `Authorization: Bearer` this token
# (empty: staff only). PROMETHEUS_MULTIPROC_DIR, read by prometheus-client itself, sums the
# metrics of every server process.
PALIMPSEST_METRICS_TOKEN = os.environ.get("PALIMPSEST_METRICS_TOKEN", "")
# Output budget of one model call.
PALIMPSEST_MAX_OUTPUT_TOKENS = env_int("PALIMPSEST_MAX_OUTPUT_TOKENS", 8192)
# Largest client frame accepted (16 MiB); daphne's own limit is raised above it (README, PROTOCOL.md).
PALIMPSEST_MAX_FRAME_BYTES = env_int("PALIMPSEST_MAX_FRAME_BYTES", 16 * 1024 * 1024)
# The only folder built-in file tools may read; empty means those tools are off.
PALIMPSEST_FS_ROOT = os.environ.get("PALIMPSEST_FS_ROOT", "")
# The code sandbox (run_sandbox_code): auto (on where a trial bubblewrap run succeeds), bwrap (required), off.
PALIMPSEST_SANDBOX = os.environ.get("PALIMPSEST_SANDBOX", "auto")
# A turn holds its session's lease this long between heartbeats; a crashed process's lease runs out.
PALIMPSEST_TURN_LEASE_SECONDS = env_int("PALIMPSEST_TURN_LEASE_SECONDS", 60)
# How often each process looks for turns whose lease ran out (their process died) and repairs them.
PALIMPSEST_TURN_SWEEP_SECONDS = env_float("PALIMPSEST_TURN_SWEEP_SECONDS", 15.0)
# How long a turn waits for a client's tool.result before giving the model a tool error.
PALIMPSEST_CLIENT_TOOL_TIMEOUT_SECONDS = env_int("PALIMPSEST_CLIENT_TOOL_TIMEOUT_SECONDS", 600)


def _approvals_default_from_env(raw: str) -> dict[str, str]:
    """PALIMPSEST_APPROVALS_DEFAULT (docs/operations.md, "Tool approvals"): a policy for every tool
    (`always_ask`, `always_allow`) or a JSON object, tool name or prefix* -> policy; it comes after a
    session's `settings.approvals` and before the features' defaults (MCP tools: `always_ask`)."""
    raw = raw.strip()
    if not raw:
        return {}
    if raw in POLICIES:
        return {"*": raw}
    try:
        given = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"PALIMPSEST_APPROVALS_DEFAULT is neither {' nor '.join(POLICIES)} nor JSON: {exc}"
        ) from exc
    try:
        return {k: v for k, v in policy_map_check(given, where="PALIMPSEST_APPROVALS_DEFAULT").items() if v}
    except PolicyMapError as exc:
        raise ImproperlyConfigured(str(exc)) from None


# Tool approvals: the service's default policies (see `_approvals_default_from_env`).
PALIMPSEST_APPROVALS_DEFAULT = _approvals_default_from_env(
    os.environ.get("PALIMPSEST_APPROVALS_DEFAULT") or ""
)
# How often waiting turns are looked up in the database for cancels written by another process
# (one query for all of a process's turns), and a turn waiting on a client's tool for its results.
PALIMPSEST_POLL_SECONDS = float(os.environ.get("PALIMPSEST_POLL_SECONDS", "1.0"))
# The engine's database threads, each with its own connection (0: Django's one shared thread).
# SQLite has one writer: past two threads (one long read need not hold up everyone's writes),
# more threads only wait on its lock and on the GIL. PostgreSQL writes in parallel.
PALIMPSEST_DB_THREADS = env_int("PALIMPSEST_DB_THREADS", 2 if DATABASE_IS_SQLITE else 4)
# A turn's start drops expired observations' content (of every session) at most this often per
# process: a sweep of the whole store is not every turn's work, and an expired id reads as
# expired whether or not its content is gone yet.
PALIMPSEST_OBSERVATIONS_GC_SECONDS = env_float("PALIMPSEST_OBSERVATIONS_GC_SECONDS", 60.0)
# Retention (DESIGN.md "Operating Palimpsest"): ended sessions are deleted, with everything they
# hold, this many days after they ended (a sub-session with its root). Unset or empty: off.
PALIMPSEST_RETENTION_DAYS = env_int("PALIMPSEST_RETENTION_DAYS", 0) or None
if PALIMPSEST_RETENTION_DAYS is not None and PALIMPSEST_RETENTION_DAYS < 1:
    raise ImproperlyConfigured(
        "PALIMPSEST_RETENTION_DAYS must be a whole number of days of at least 1, "
        f"got {PALIMPSEST_RETENTION_DAYS}"
    )
# How often a process's sweep looks for sessions past retention (when it is on).
PALIMPSEST_RETENTION_SWEEP_SECONDS = env_float("PALIMPSEST_RETENTION_SWEEP_SECONDS", 3600.0)
# A model stream that sends nothing this long is a model error (retried like a 5xx while none of
# its text was streamed; PROTOCOL.md v1.1).
PALIMPSEST_MODEL_IDLE_SECONDS = env_float("PALIMPSEST_MODEL_IDLE_SECONDS", 120.0)
# Pause before re-sending a request whose stream broke before any text (doubled each retry).
PALIMPSEST_MODEL_STREAM_RETRY_SECONDS = env_float("PALIMPSEST_MODEL_STREAM_RETRY_SECONDS", 1.0)
# Pause between the scripted model's streamed pieces of about 48 characters (make run sets a
# small one so streaming shows: a 1,800-character answer then takes about 1 s).
PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS = float(
    os.environ.get("PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS", "0")
)
# Seed 002's compactThreshold: the share of a session's context window past which it is compacted,
# for a session that names no `compact_threshold` of its own (a session's own value is checked as
# PROTOCOL.md says: above 0, at most 1; so is this one, at start).
PALIMPSEST_COMPACT_THRESHOLD = env_float("PALIMPSEST_COMPACT_THRESHOLD", 0.8)
if not 0 < PALIMPSEST_COMPACT_THRESHOLD <= 1:  # NaN fails this too
    raise ImproperlyConfigured(
        "PALIMPSEST_COMPACT_THRESHOLD must be a number above 0 and at most 1 (a share of the context "
        f"window, e.g. 0.8), got {os.environ.get('PALIMPSEST_COMPACT_THRESHOLD')!r}"
    )
# The largest session export document `POST /api/v1/sessions/import` takes (docs/export.md): the
# body is read in pieces into a temporary file up to this size, not through Django's in-memory
# DATA_UPLOAD_MAX_MEMORY_SIZE; a larger one is a 413 `too_large`. 256 MiB unless set.
PALIMPSEST_IMPORT_MAX_BYTES = env_int("PALIMPSEST_IMPORT_MAX_BYTES", 256 * 1024 * 1024)
# First wait before a failed compaction summary call is tried again (doubling each time).
PALIMPSEST_COMPACTION_RETRY_SECONDS = float(os.environ.get("PALIMPSEST_COMPACTION_RETRY_SECONDS", "1.0"))
# Per-process caches, in bytes (bench/README.md, "Memory per connection and per session"): the
# sessions' prepared histories (a 10,000-message history is ~17 MB), and each session's previous
# request for the stable prefix (~3 MB at 10,000 messages). Least recently used sessions go first;
# a turn reads an evicted history from the database again.
PALIMPSEST_HISTORY_CACHE_BYTES = env_int("PALIMPSEST_HISTORY_CACHE_BYTES", 256 * 1024 * 1024)
PALIMPSEST_PREFIX_CACHE_BYTES = env_int("PALIMPSEST_PREFIX_CACHE_BYTES", 128 * 1024 * 1024)

# Estimated cost on the dashboard: USD per million tokens of each kind, per model. List prices as
# of 2026-11-23 per the model table in the Anthropic docs ("Model pricing": base input, 5-minute
# cache writes, which is what the engine's breakpoints write, cache hits, output). Estimates only:
# no batch or long-context rates, no discounts. A model not listed shows its tokens without a cost.
# PALIMPSEST_MODEL_PRICES_JSON adds or replaces entries:
# {"model": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}}.
_OPUS_4 = {"input": 15.0, "output": 75.0, "cache_write": 18.75, "cache_read": 1.5}
_OPUS_4_5 = {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.5}
_SONNET = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}
_HAIKU_4_5 = {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.1}
_HAIKU_3_5 = {"input": 0.8, "output": 4.0, "cache_write": 1.0, "cache_read": 0.08}
_HAIKU_3 = {"input": 0.25, "output": 1.25, "cache_write": 0.3, "cache_read": 0.03}
# OpenAI's models of seed 002's table, at OpenAI's standard-tier list prices (input, cached input,
# output). OpenAI caches prefixes by itself and charges nothing to write them: its calls report
# no cache writes, and cache_write is the input price only to fill the entry.
_GPT_4O = {"input": 2.5, "output": 10.0, "cache_write": 2.5, "cache_read": 1.25}
_GPT_4O_MINI = {"input": 0.15, "output": 0.6, "cache_write": 0.15, "cache_read": 0.075}
_GPT_4_1 = {"input": 2.0, "output": 8.0, "cache_write": 2.0, "cache_read": 0.5}
_GPT_4_1_MINI = {"input": 0.4, "output": 1.6, "cache_write": 0.4, "cache_read": 0.1}
PALIMPSEST_MODEL_PRICES: dict[str, dict[str, float]] = {
    "claude-opus-4-20250514": _OPUS_4,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4-1-20250805": _OPUS_4,
    "claude-opus-4-5": _OPUS_4_5,
    "claude-opus-4-5-20251101": _OPUS_4_5,
    "claude-opus-4-6": _OPUS_4_5,
    "claude-sonnet-4-20250514": _SONNET,
    "claude-sonnet-4-5": _SONNET,
    "claude-sonnet-4-5-20250929": _SONNET,
    "claude-sonnet-4-6": _SONNET,
    "claude-3-7-sonnet-20250219": _SONNET,
    "claude-haiku-4-5": _HAIKU_4_5,
    "claude-haiku-4-5-20251001": _HAIKU_4_5,
    "claude-3-5-haiku-20241022": _HAIKU_3_5,
    "claude-3-haiku-20240307": _HAIKU_3,
    "gpt-4o": _GPT_4O,
    "gpt-4o-mini": _GPT_4O_MINI,
    "gpt-4.1": _GPT_4_1,
    "gpt-4.1-mini": _GPT_4_1_MINI,
}
_PRICE_KINDS = ("input", "output", "cache_write", "cache_read")


def _model_prices_from_env(raw: str) -> dict[str, dict[str, float]]:
    try:
        given = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"PALIMPSEST_MODEL_PRICES_JSON is not JSON: {exc}") from exc
    if not isinstance(given, dict):
        raise ImproperlyConfigured("PALIMPSEST_MODEL_PRICES_JSON must be an object: model -> prices.")
    prices: dict[str, dict[str, float]] = {}
    for model, entry in given.items():
        if not isinstance(entry, dict) or set(entry) != set(_PRICE_KINDS):
            raise ImproperlyConfigured(
                f"PALIMPSEST_MODEL_PRICES_JSON[{model!r}] must give exactly {', '.join(_PRICE_KINDS)}."
            )
        for kind, value in entry.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ImproperlyConfigured(
                    f"PALIMPSEST_MODEL_PRICES_JSON[{model!r}][{kind!r}] must be a number >= 0 (USD per "
                    "million tokens)."
                )
        prices[model] = {kind: float(entry[kind]) for kind in _PRICE_KINDS}
    return prices


PALIMPSEST_MODEL_PRICES.update(_model_prices_from_env(os.environ.get("PALIMPSEST_MODEL_PRICES_JSON") or "{}"))

# ---------------------------------------------------------------------------
# Features and wiring (docs/architecture.md)
# ---------------------------------------------------------------------------
# The features the engine reads, in order (after its own core feature): this order is the order of
# their sections in the system prompt and of their tools in every request, so it decides the cached
# prefix. Each entry is a `Feature` object.
PALIMPSEST_FEATURES = [
    # The agent's knowledge first: its tools lead as its sections (rendered by the engine) lead the
    # system prompt; offered only to a session of an agent, so other sessions' requests are unchanged.
    "memory_app.knowledge.feature.FEATURE",
    # Then the agent's memory of its sessions: offered to a session of an agent (with the knowledge
    # tools) and to a session without one once it has an archive (its tool list changes then anyway).
    "memory_app.recall.feature.FEATURE",
    "memory_app.count_words.feature.FEATURE",
    "memory_app.notepad.feature.FEATURE",
    "memory_app.scratchpad.feature.FEATURE",
    "memory_app.files.feature.FEATURE",
    "memory_app.observations.feature.FEATURE",
    "memory_app.sandbox.feature.FEATURE",
    "memory_app.subsessions.feature.FEATURE",
    "memory_app.tasks.feature.FEATURE",
    # An agent's own tools: offered only to a session of an agent with the sandbox on, after every
    # other tool. A definition changes the tool list, which leads the cached prefix: the next
    # request writes the cache again once (docs/prompt-cache.md).
    "memory_app.authored_tools.feature.FEATURE",
    # MCP tool servers (docs/mcp.md): the service's (PALIMPSEST_MCP_SERVERS) and the session's
    # agent's, offered last; none configured leaves every request as it was.
    "memory_app.mcp.feature.FEATURE",
]

# ---------------------------------------------------------------------------
# MCP tool servers (docs/mcp.md): configured by operators only. PALIMPSEST_MCP_SERVERS is a JSON
# object, server name -> {"command", "args", "env"} (stdio: a command this service runs) or
# {"url"} (streamable HTTP); every session is offered their tools as mcp__<server>__<tool>, then
# those of the servers an operator attaches to its agent (the dashboard's agent page). Checked
# here: a bad value stops the start.
# ---------------------------------------------------------------------------


def _mcp_servers_from_env(raw: str) -> dict:
    try:
        servers = mcp_servers_parse(raw)
    except McpConfigError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    return {server.name: server.as_json() for server in servers}


PALIMPSEST_MCP_SERVERS = _mcp_servers_from_env(os.environ.get("PALIMPSEST_MCP_SERVERS") or "{}")
# A call of an MCP tool that takes longer is a tool error (the server is restarted).
PALIMPSEST_MCP_CALL_TIMEOUT_SECONDS = env_float("PALIMPSEST_MCP_CALL_TIMEOUT_SECONDS", 60.0)
# Starting a server and listing its tools; a server not up by then is failed (and retried later).
PALIMPSEST_MCP_START_TIMEOUT_SECONDS = env_float("PALIMPSEST_MCP_START_TIMEOUT_SECONDS", 30.0)

# Where committed events go to reach watchers (the channel layer; tests may swap it).
PALIMPSEST_ANNOUNCER = "sessions_app.fastpath.channel_announcer.announce_via_channel_layer"

# ---------------------------------------------------------------------------
# Sub-sessions: service-wide ceilings on how many a tree may make (docs/subsessions.md, "Limits").
# A session's settings `subsessions.max_per_step`, `max_per_tree` and `max_per_client` choose a
# bound up to its ceiling; a setting above it is clamped to it (the bound is the smaller).
# ---------------------------------------------------------------------------


def _subsessions_ceiling(name: str, default: int) -> int:
    value = env_int(name, default)
    if value < 1:
        raise ImproperlyConfigured(
            f"{name} must be at least 1 (to switch sub-sessions off, leave out their feature)."
        )
    return value


# Children of one parent turn running at once: with its children's own, a tree may run about this
# squared at once in one process (bench/bench_abuse.py fanout: 4 keeps another client's turns
# under 0.4 s where 32 stalled them 1.3 s on one daphne with two cores).
PALIMPSEST_SUBSESSIONS_MAX_CONCURRENT = _subsessions_ceiling("PALIMPSEST_SUBSESSIONS_MAX_CONCURRENT", 4)
PALIMPSEST_SUBSESSIONS_MAX_PER_STEP = _subsessions_ceiling("PALIMPSEST_SUBSESSIONS_MAX_PER_STEP", 16)
PALIMPSEST_SUBSESSIONS_MAX_PER_TREE = _subsessions_ceiling("PALIMPSEST_SUBSESSIONS_MAX_PER_TREE", 200)
PALIMPSEST_SUBSESSIONS_MAX_PER_CLIENT = _subsessions_ceiling("PALIMPSEST_SUBSESSIONS_MAX_PER_CLIENT", 500)

# ---------------------------------------------------------------------------
# Websocket limits (README: "Limits")
# ---------------------------------------------------------------------------
# Each process re-checks the tokens of its open agent connections this often; a revoked token's
# connections are closed with 4401 (also checked before a frame when the last check is older).
PALIMPSEST_TOKEN_RECHECK_SECONDS = env_float("PALIMPSEST_TOKEN_RECHECK_SECONDS", 2.0)
# Each process checks this often whether an agent connection is behind the database on a session
# it follows (a broadcast lost) and has it catch up: one query for the process's followed sessions.
PALIMPSEST_STREAM_CHECK_SECONDS = env_float("PALIMPSEST_STREAM_CHECK_SECONDS", 0.5)
# A client that reads nothing for this long while the server has frames for it is closed (4408);
# until then a connection's unsent frames are held to about 64 KiB beyond the kernel's buffers.
PALIMPSEST_WS_DRAIN_SECONDS = env_float("PALIMPSEST_WS_DRAIN_SECONDS", 30.0)
# A connection's frames received and not yet handled: at most this many, and this many bytes
# (one frame is always let in when none waits); a frame past them is refused with rate_limited
# as it arrives, as is a frame over the frame quota. The bytes bound what every open connection
# may make the server hold (times PALIMPSEST_QUOTA_CONNECTIONS per token): 4 MiB lets a burst
# of client tool results wait, and a frame as large as PALIMPSEST_MAX_FRAME_BYTES still passes.
PALIMPSEST_WS_BACKLOG_FRAMES = max(1, env_int("PALIMPSEST_WS_BACKLOG_FRAMES", 64))
PALIMPSEST_WS_BACKLOG_BYTES = max(0, env_int("PALIMPSEST_WS_BACKLOG_BYTES", 4 * 1024 * 1024))
# Descendants of a session whose events one `session.attach` (or `session.follow`) follows and
# replays at most, shallowest and oldest first; a client asks for the others with session.follow.
# By default the ceiling on a tree's sub-sessions: a tree the service lets grow fits one page, so a
# v1 client (which knows nothing of session.follow) sees all of it.
PALIMPSEST_ATTACH_DESCENDANTS = max(
    1, env_int("PALIMPSEST_ATTACH_DESCENDANTS", PALIMPSEST_SUBSESSIONS_MAX_PER_TREE)
)
# A connection that had this many frames refused in a burst (refilling over 10 s) is closed with
# 4429; 0: never closed for it.
PALIMPSEST_WS_REFUSALS_BEFORE_CLOSE = env_int("PALIMPSEST_WS_REFUSALS_BEFORE_CLOSE", 100)

# ---------------------------------------------------------------------------
# Quotas per agent token, counted per server process (README: "Limits"); 0 switches one off.
# The defaults let one token open 500 sessions at once (a connection, a session.create and a
# user.message each).
# ---------------------------------------------------------------------------
PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE = env_int("PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE", 1000)
PALIMPSEST_QUOTA_CONNECTIONS = env_int("PALIMPSEST_QUOTA_CONNECTIONS", 1000)
PALIMPSEST_QUOTA_FRAMES_PER_SECOND = env_int("PALIMPSEST_QUOTA_FRAMES_PER_SECOND", 2000)

# ---------------------------------------------------------------------------
# Sub-sessions (docs/subsessions.md): ceilings a session's settings cannot raise
# ---------------------------------------------------------------------------
# The most tokens of history a fork may copy, whatever the session's `subsessions.fork_max_tokens`
# says: every fork stores its copy and its first request sends it.
PALIMPSEST_FORK_MAX_TOKENS = env_int("PALIMPSEST_FORK_MAX_TOKENS", 1_000_000)
