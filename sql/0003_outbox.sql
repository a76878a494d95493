-- 0003: transactional outbox. The message for a task is written in the same transaction as the
-- task row; the API publishes it inline after commit (fast path) and a relay publishes whatever
-- is still unpublished (FOR UPDATE SKIP LOCKED), marking rows only after the broker's confirm.
CREATE TABLE outbox (
    id           BIGSERIAL PRIMARY KEY,
    task_id      BIGINT NOT NULL,
    message_id   UUID NOT NULL UNIQUE,
    exchange     TEXT NOT NULL,
    routing_key  TEXT NOT NULL,
    body         JSONB NOT NULL,
    attempts     INT NOT NULL DEFAULT 0,
    last_error   TEXT,
    create_time  TIMESTAMPTZ NOT NULL DEFAULT now(),
    published_at TIMESTAMPTZ
);
CREATE INDEX outbox_pending_idx ON outbox (id) WHERE published_at IS NULL;
