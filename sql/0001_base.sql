-- 0001: users, tokens, knowledge bases, documents, chunks and vectors (the seed's first schema:
-- no index state yet; 0002 adds it with a backfill).
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE app_user (
    id          BIGSERIAL PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Tokens are stored as SHA-256 of the secret, never in clear.
CREATE TABLE api_token (
    id           BIGSERIAL PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES app_user(id) ON DELETE CASCADE,
    token_sha256 BYTEA NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
    revoked_at   TIMESTAMPTZ,
    create_time  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE knowledge_base (
    id              BIGSERIAL PRIMARY KEY,
    user_id         BIGINT NOT NULL REFERENCES app_user(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    embedding_model TEXT NOT NULL,
    embedding_dim   INT NOT NULL CHECK (embedding_dim > 0),
    create_time     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX knowledge_base_user_idx ON knowledge_base (user_id);

CREATE TABLE document_info (
    id           BIGSERIAL PRIMARY KEY,
    kb_id        BIGINT NOT NULL REFERENCES knowledge_base(id) ON DELETE CASCADE,
    user_id      BIGINT NOT NULL REFERENCES app_user(id) ON DELETE CASCADE,
    filename     TEXT NOT NULL,
    content_type TEXT,
    size_bytes   BIGINT NOT NULL CHECK (size_bytes >= 0),
    sha256       TEXT NOT NULL,
    object_key   TEXT NOT NULL UNIQUE,
    create_time  TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX document_info_kb_idx ON document_info (kb_id);

CREATE TABLE document_chunk (
    id          BIGSERIAL PRIMARY KEY,
    document_id BIGINT NOT NULL REFERENCES document_info(id) ON DELETE CASCADE,
    chunk_index INT NOT NULL CHECK (chunk_index >= 0),
    content     TEXT NOT NULL,
    token_count INT NOT NULL CHECK (token_count >= 0),
    CONSTRAINT uk_document_chunk_index UNIQUE (document_id, chunk_index)
);

CREATE TABLE document_vector (
    chunk_id    BIGINT PRIMARY KEY REFERENCES document_chunk(id) ON DELETE CASCADE,
    document_id BIGINT NOT NULL REFERENCES document_info(id) ON DELETE CASCADE,
    kb_id       BIGINT NOT NULL,
    embedding   vector(384) NOT NULL
);
CREATE INDEX document_vector_document_idx ON document_vector (document_id);
CREATE INDEX document_vector_kb_idx ON document_vector (kb_id);
CREATE INDEX document_vector_embedding_hnsw ON document_vector USING hnsw (embedding vector_cosine_ops);
