-- 0004: messages drained from rag.index.dlq by the scanner: their task is marked FAILED with the
-- dead-letter reason and the message is kept here to be listed and replayed (CLI).
CREATE TABLE dead_letter (
    id          BIGSERIAL PRIMARY KEY,
    message_id  TEXT,
    task_id     BIGINT,
    document_id BIGINT,
    generation  BIGINT,
    reason      TEXT NOT NULL,
    body        BYTEA NOT NULL,
    headers     JSONB NOT NULL DEFAULT '{}',
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    replayed_at TIMESTAMPTZ
);
CREATE INDEX dead_letter_pending_idx ON dead_letter (id) WHERE replayed_at IS NULL;
