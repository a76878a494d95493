-- 0011: do no work twice (issue 13).
--
-- 1. Embedding cache: the vector of a chunk text, keyed by (model, revision, SHA-256 of the text).
--    `revision` names what else changes the vectors (a model revision, else the dimension):
--    a new revision never reads an old one's vectors. The vector column has no fixed dimension
--    (several models may share the table); `dim` is stored and checked on read.
--    `last_used` is touched at most once per EMBEDDING_CACHE_TOUCH_INTERVAL_S per row (no write
--    per hit); the periodic eviction deletes the least recently used rows above
--    EMBEDDING_CACHE_MAX_ROWS.
CREATE TABLE embedding_cache (
    model       TEXT NOT NULL,
    revision    TEXT NOT NULL,
    text_sha256 BYTEA NOT NULL CHECK (octet_length(text_sha256) = 32),
    dim         INT NOT NULL CHECK (dim > 0),
    embedding   vector NOT NULL CHECK (vector_dims(embedding) = dim),
    last_used   TIMESTAMPTZ NOT NULL DEFAULT now(),
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (model, revision, text_sha256)
);
CREATE INDEX embedding_cache_lru_idx ON embedding_cache (last_used);

-- One row per embedding step of a run (as before); the chunks found in the cache and the chunks
-- sent to the model. A step with cache_misses = 0 made no model call. Rows written before this
-- migration sent every chunk to the model.
ALTER TABLE embedding_run
    ADD COLUMN cache_hits   INT NOT NULL DEFAULT 0 CHECK (cache_hits >= 0),
    ADD COLUMN cache_misses INT;
UPDATE embedding_run SET cache_misses = chunk_count;
ALTER TABLE embedding_run
    ALTER COLUMN cache_misses SET NOT NULL,
    ADD CONSTRAINT embedding_run_cache_check CHECK (cache_misses >= 0 AND cache_hits + cache_misses = chunk_count);

-- 2. Content dedup per KB. A document uploaded without ?allow_duplicate=true holds its KB's
--    slot for its bytes' SHA-256 (`dedup_slot`): the unique partial index lets the database
--    decide between concurrent identical uploads. Documents uploaded with allow_duplicate=true,
--    and documents whose content was replaced, hold no slot (a replacement must never collide
--    with another document's slot); uploads still find them by (kb_id, sha256) and answer
--    `duplicate_of`.
ALTER TABLE document_info ADD COLUMN dedup_slot BOOLEAN NOT NULL DEFAULT false;
CREATE UNIQUE INDEX document_info_kb_content_uniq ON document_info (kb_id, sha256) WHERE dedup_slot;
CREATE INDEX document_info_kb_sha256_idx ON document_info (kb_id, sha256);
