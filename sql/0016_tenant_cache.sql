-- 0016: the embedding cache per tenant (issue 18).
--
-- 0011 keyed an entry by (model, revision, SHA-256 of the chunk text) only: user B's upload of
-- user A's text was served from A's entries, and B could time it (a cache-hit run is ~400x
-- faster) to learn what A had indexed. An entry now belongs to a user (the tenant: a knowledge
-- base has one owner and every route checks it), and only that user's runs read or write it.
-- Per user rather than per knowledge base: within one user nothing is secret, and the same text
-- in two of their knowledge bases, or content they go back to, costs no model call (P3).
--
-- Deleting a document removes, in the same transaction, the entries of its chunks' texts that no
-- remaining chunk of that user has (document_chunk.text_sha256 below tells which); deleting a
-- knowledge base removes every entry of the user that no remaining chunk of theirs has (also
-- what earlier versions of documents left; a version swap keeps them). Deleting a user removes
-- all their entries (ON DELETE CASCADE).

-- 1. Chunks carry the SHA-256 of their text (the cache key, as UTF-8, exactly what the model was
--    sent). The worker writes it; the trigger fills it for any other writer.
ALTER TABLE document_chunk ADD COLUMN text_sha256 BYTEA;
UPDATE document_chunk SET text_sha256 = sha256(convert_to(content, 'UTF8'));
ALTER TABLE document_chunk
    ALTER COLUMN text_sha256 SET NOT NULL,
    ADD CONSTRAINT document_chunk_text_sha256_check CHECK (octet_length(text_sha256) = 32);
CREATE INDEX document_chunk_text_sha256_idx ON document_chunk (text_sha256);

CREATE FUNCTION rag_chunk_text_sha256() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.text_sha256 := sha256(convert_to(NEW.content, 'UTF8'));
    RETURN NEW;
END
$$;

CREATE TRIGGER document_chunk_text_sha256 BEFORE INSERT ON document_chunk
    FOR EACH ROW WHEN (NEW.text_sha256 IS NULL) EXECUTE FUNCTION rag_chunk_text_sha256();

-- 2. Entries get an owner. An existing entry is kept once for every user one of whose chunks
--    has its text (that user has done the work); an entry no chunk uses is dropped.
ALTER TABLE embedding_cache
    DROP CONSTRAINT embedding_cache_pkey,
    ADD COLUMN user_id BIGINT REFERENCES app_user(id) ON DELETE CASCADE;
INSERT INTO embedding_cache (user_id, model, revision, text_sha256, dim, embedding, last_used, create_time)
    SELECT DISTINCT ON (d.user_id, c.model, c.revision, c.text_sha256)
           d.user_id, c.model, c.revision, c.text_sha256, c.dim, c.embedding, c.last_used, c.create_time
    FROM embedding_cache c
    JOIN document_chunk ch ON ch.text_sha256 = c.text_sha256
    JOIN document_info d ON d.id = ch.document_id
    WHERE c.user_id IS NULL;
DELETE FROM embedding_cache WHERE user_id IS NULL;
ALTER TABLE embedding_cache
    ALTER COLUMN user_id SET NOT NULL,
    -- text before namespace: a release (user, texts) is an index range, and so is a lookup
    ADD PRIMARY KEY (user_id, text_sha256, model, revision);
