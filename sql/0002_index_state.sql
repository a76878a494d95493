-- 0002: index state on documents (status + generation, the fencing token) and the index_task
-- table. Backfill: every existing row gets a defined state — documents that already have
-- chunks were indexed by the old pipeline (INDEXED, generation 1); the others were never
-- indexed (UPLOADED, generation 0: no generation has been issued for them).
ALTER TABLE document_info
    ADD COLUMN status           TEXT,
    ADD COLUMN index_generation BIGINT,
    ADD COLUMN chunk_count      INT,
    ADD COLUMN error_message    TEXT;

UPDATE document_info d
   SET chunk_count      = c.n,
       status           = CASE WHEN c.n > 0 THEN 'INDEXED' ELSE 'UPLOADED' END,
       index_generation = CASE WHEN c.n > 0 THEN 1 ELSE 0 END
  FROM (SELECT di.id, count(dc.id)::int AS n
          FROM document_info di LEFT JOIN document_chunk dc ON dc.document_id = di.id
         GROUP BY di.id) c
 WHERE c.id = d.id;

ALTER TABLE document_info
    ALTER COLUMN status SET NOT NULL,
    ALTER COLUMN status SET DEFAULT 'UPLOADED',
    ALTER COLUMN index_generation SET NOT NULL,
    ALTER COLUMN index_generation SET DEFAULT 0,
    ALTER COLUMN chunk_count SET NOT NULL,
    ALTER COLUMN chunk_count SET DEFAULT 0,
    ADD CONSTRAINT document_info_status_check
        CHECK (status IN ('UPLOADED', 'INDEXING', 'INDEXED', 'FAILED')),
    ADD CONSTRAINT document_info_generation_check CHECK (index_generation >= 0);

-- One task row per document, re-armed (new generation) by retry, reindex, new content and
-- stale takeover. `attempt` is bumped by every claim and checked at every write: together with
-- `generation` it is the fencing token (a paused worker resuming with the same generation
-- holds an old attempt and cannot commit).
CREATE TABLE index_task (
    id              BIGSERIAL PRIMARY KEY,
    document_id     BIGINT NOT NULL REFERENCES document_info(id) ON DELETE CASCADE,
    kb_id           BIGINT NOT NULL,
    user_id         BIGINT NOT NULL,
    generation      BIGINT NOT NULL CHECK (generation > 0),
    attempt         INT NOT NULL DEFAULT 0,
    status          TEXT NOT NULL CHECK (status IN
                        ('WAITING', 'RUNNING', 'SUCCESS', 'FAILED', 'RETRYING', 'TIMEOUT')),
    retry_count     INT NOT NULL DEFAULT 0,
    max_retry_count INT NOT NULL DEFAULT 3,
    error_code      TEXT,
    error_message   TEXT,
    start_time      TIMESTAMPTZ,
    end_time        TIMESTAMPTZ,
    create_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT uk_index_task_document UNIQUE (document_id)
);
CREATE INDEX index_task_active_idx ON index_task (status, update_time)
    WHERE status IN ('WAITING', 'RETRYING', 'RUNNING');
CREATE INDEX index_task_user_active_idx ON index_task (user_id)
    WHERE status IN ('WAITING', 'RETRYING', 'RUNNING');

-- One row per call into the embedding model for a document: tests and operators read the cost
-- of redeliveries here (a duplicate embedding run shows as a second row).
CREATE TABLE embedding_run (
    id          BIGSERIAL PRIMARY KEY,
    task_id     BIGINT NOT NULL,
    document_id BIGINT NOT NULL,
    generation  BIGINT NOT NULL,
    attempt     INT NOT NULL,
    chunk_count INT NOT NULL,
    worker      TEXT NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX embedding_run_document_idx ON embedding_run (document_id);

-- Deliveries the worker acked without doing the work, by reason
-- (stale_generation, not_runnable, lock_held_exhausted, ...).
CREATE TABLE delivery_skip (
    id          BIGSERIAL PRIMARY KEY,
    reason      TEXT NOT NULL,
    task_id     BIGINT,
    document_id BIGINT,
    generation  BIGINT,
    worker      TEXT NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX delivery_skip_document_idx ON delivery_skip (document_id);
