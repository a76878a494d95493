-- 0009: document versions (issue 11).
--
-- The columns of document_info (filename, content_type, size_bytes, sha256, object_key, status,
-- chunk_count, warnings) describe the SERVED version: the last INDEXED one, whose chunks and
-- vectors search reads. New content for a document that has a served version becomes its
-- PENDING version (the pending_* columns, at most one) until that version's run commits: the
-- fenced commit swaps it in and queues the replaced object for removal in the same transaction.
-- A document never indexed has no pending version: new content replaces its columns directly.
ALTER TABLE document_info
    ADD COLUMN pending_filename     TEXT,
    ADD COLUMN pending_content_type TEXT,
    ADD COLUMN pending_size_bytes   BIGINT CHECK (pending_size_bytes >= 0),
    ADD COLUMN pending_sha256       TEXT,
    ADD COLUMN pending_object_key   TEXT UNIQUE,
    ADD COLUMN pending_create_time  TIMESTAMPTZ,
    ADD CONSTRAINT document_info_pending_complete CHECK (
        (pending_object_key IS NULL) = (pending_filename IS NULL)
        AND (pending_object_key IS NULL) = (pending_size_bytes IS NULL)
        AND (pending_object_key IS NULL) = (pending_sha256 IS NULL)
        AND (pending_object_key IS NULL) = (pending_create_time IS NULL)
    );

-- Objects that no row refers to any more, written by the transaction that released them (a
-- version swapped out, a pending version replaced or dropped, a document deleted) and removed
-- from storage only after that commit (an outbox for deletions). Whoever committed removes them
-- at once; the worker's periodic sweep removes what a crash left behind.
CREATE TABLE object_removal (
    id          BIGSERIAL PRIMARY KEY,
    object_key  TEXT NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now()
);
