-- 0015: keyword search filtered by KB inside the index (issue 20, item 3).
--
-- Before, the keyword list took every chunk of the whole table matching the selecting terms from
-- the GIN index on content_tsv, then kept those of the KB's documents (a join per candidate):
-- the cost grew with the other KBs' matches. Now each chunk carries its KB (document_chunk.kb_id,
-- as document_vector does) and one GIN index over (kb_id, content_tsv) answers
-- "kb_id = $kb AND content_tsv @@ q" directly: btree_gin gives the bigint column GIN operator
-- classes (PostgreSQL docs, "F.7. btree_gin"; a multicolumn GIN index serves conditions on any
-- subset of its columns, "11.3. Multicolumn Indexes"), so the same index also serves the
-- table-wide term counts and replaces the single-column one (one GIN index to maintain on insert).
--
-- kb_id is filled from document_info by a trigger when an insert leaves it NULL (every writer of
-- document_chunk keeps working unchanged; a document never changes KB), backfilled here.
-- Must run after 0014 (which re-creates content_tsv and its index).
CREATE EXTENSION IF NOT EXISTS btree_gin;

ALTER TABLE document_chunk ADD COLUMN kb_id BIGINT;

UPDATE document_chunk c SET kb_id = d.kb_id FROM document_info d WHERE d.id = c.document_id;

ALTER TABLE document_chunk ALTER COLUMN kb_id SET NOT NULL;

CREATE FUNCTION rag_chunk_kb() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    SELECT d.kb_id INTO NEW.kb_id FROM document_info d WHERE d.id = NEW.document_id;
    RETURN NEW;
END
$$;

CREATE TRIGGER document_chunk_kb BEFORE INSERT ON document_chunk
    FOR EACH ROW WHEN (NEW.kb_id IS NULL) EXECUTE FUNCTION rag_chunk_kb();

CREATE INDEX document_chunk_kb_tsv_idx ON document_chunk USING gin (kb_id, content_tsv);
DROP INDEX IF EXISTS document_chunk_content_tsv_idx;

ANALYZE document_chunk;
