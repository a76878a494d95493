-- 0017: a big document in parts (issue 31; ARCHITECTURE.md "Flow 3").
--
-- A document of at least SPLIT_MIN_CHUNKS chunks is split after chunking: its chunks are staged
-- here, its embedding cut into parts any worker claims (fenced by the task's generation and the
-- part's own attempt), each part's vectors staged by its own commit, and the last part's commit
-- swaps the staged rows into document_chunk / document_vector (server-side) in one transaction.
-- Deleting the index_split row (swap, failure, new generation, delete) removes every part and
-- staged row of the task. Lock order: document_info -> index_task -> index_split/index_part ->
-- staged rows.

-- One row per split (one generation of one task; a new generation deletes it first).
CREATE TABLE index_split (
    task_id     BIGINT PRIMARY KEY REFERENCES index_task(id) ON DELETE CASCADE,
    generation  BIGINT NOT NULL,
    attempt     INT NOT NULL,              -- the document claim that split (the swap is fenced on it)
    parts       INT NOT NULL CHECK (parts > 0),
    chunks      INT NOT NULL CHECK (chunks > 0),
    warnings    JSONB NOT NULL DEFAULT '[]',  -- the extraction's, written to the document by the swap
    create_time TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE index_part (
    task_id       BIGINT NOT NULL REFERENCES index_split(task_id) ON DELETE CASCADE,
    part          INT NOT NULL CHECK (part >= 0),
    generation    BIGINT NOT NULL,
    first_chunk   INT NOT NULL CHECK (first_chunk >= 0),
    chunk_count   INT NOT NULL CHECK (chunk_count > 0),
    status        TEXT NOT NULL DEFAULT 'WAITING' CHECK (status IN ('WAITING', 'RUNNING', 'DONE')),
    attempt       INT NOT NULL DEFAULT 0,  -- the part's fencing token, with generation
    embedded      INT NOT NULL DEFAULT 0 CHECK (embedded >= 0 AND embedded <= chunk_count),
    dispatched_at TIMESTAMPTZ,             -- holds one of its user's K dispatch slots while not DONE
    worker        TEXT,
    start_time    TIMESTAMPTZ,
    update_time   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, part)
);
-- the scanner's silent parts and the fair dispatch's dispatched parts
CREATE INDEX index_part_open_idx ON index_part (update_time) WHERE status <> 'DONE';

CREATE TABLE staged_chunk (
    task_id     BIGINT NOT NULL REFERENCES index_split(task_id) ON DELETE CASCADE,
    chunk_index INT NOT NULL CHECK (chunk_index >= 0),
    content     TEXT NOT NULL,
    token_count INT NOT NULL CHECK (token_count >= 0),
    page        INT,
    section     TEXT,
    text_sha256 BYTEA NOT NULL CHECK (octet_length(text_sha256) = 32),
    PRIMARY KEY (task_id, chunk_index)
);

CREATE TABLE staged_vector (
    task_id     BIGINT NOT NULL REFERENCES index_split(task_id) ON DELETE CASCADE,
    chunk_index INT NOT NULL CHECK (chunk_index >= 0),
    embedding   vector(384) NOT NULL,
    PRIMARY KEY (task_id, chunk_index)
);

-- A part's message carries its part; a document message has none (NULL).
ALTER TABLE outbox ADD COLUMN part INT CHECK (part >= 0);
-- An embedding step of a part (the part's attempt in attempt); NULL: the single path.
ALTER TABLE embedding_run ADD COLUMN part INT CHECK (part >= 0);

-- A run waiting for its worker's model turn shows MODEL_WAIT (it showed CHUNKING, progress 0).
ALTER TABLE index_task DROP CONSTRAINT IF EXISTS index_task_stage_check;
ALTER TABLE index_task
    ADD CONSTRAINT index_task_stage_check
    CHECK (stage IN ('DOWNLOADING', 'PARSING', 'OCR', 'CHUNKING', 'MODEL_WAIT', 'EMBEDDING', 'WRITING'));

-- The HNSW index leaves the commit's path: measured while designing, COPY of 20,000 vectors took
-- 1.1 s without it and 68-101 s with it. Commits insert ann = false (no HNSW maintenance); the
-- ANN job (task_service/jobs/ann_indexer.py) sets ann = true in short batches on the vectors of
-- knowledge bases above SEARCH_EXACT_MAX_CHUNKS, the only ones vector search reads through HNSW
-- (it scans the NOT ann rest exactly and merges by distance: results unchanged). Existing rows
-- start NOT ann (this migration builds no graph; the job does, in the background).
ALTER TABLE document_vector ADD COLUMN ann BOOLEAN NOT NULL DEFAULT false;
DROP INDEX IF EXISTS document_vector_embedding_hnsw;
CREATE INDEX document_vector_embedding_hnsw ON document_vector USING hnsw (embedding vector_cosine_ops)
    WHERE ann;
-- the rows the job has not reached, per KB (the job's batches and the exact part of a search)
CREATE INDEX document_vector_not_ann_idx ON document_vector (kb_id) WHERE NOT ann;
