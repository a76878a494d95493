-- 0018: keyword statistics per knowledge base, exact (issue 28, item 1).
--
-- The keyword score weighs a query term by its document frequency (knowledge_service/search).
-- Before, frequent terms came from pg_stats of document_chunk.content_tsv (the whole table: every
-- tenant) and a term missing there was counted across all KBs, so a tenant could read from his
-- own scores how many chunks of OTHER tenants hold a word. Now every frequency is the KB's own:
--
--   kb_term        (kb_id, term, df)  chunks of the KB holding the lexeme, folded;
--                                     term '' (no lexeme is empty) holds the KB's chunk count
--   kb_term_delta  (id, kb_id, term, d)  changes not yet folded, appended by triggers
--
-- Statement-level triggers with transition tables (PostgreSQL docs, CREATE TRIGGER, "REFERENCING")
-- append ONE row per (kb, lexeme) a statement changes: a document's COPY of its chunks, the delete
-- of a document's chunks (cascades included). Writers only ever INSERT into kb_term_delta: no row
-- is shared between two commits, so concurrent indexing runs never wait on each other's counts.
-- The worker's job `term_stats` (TERM_STATS_FOLD_INTERVAL_S; `rag ops term-stats --once`) moves
-- deltas into kb_term in one transaction. The search reads kb_term + the pending deltas of the
-- query's lexemes in its one statement (one snapshot), so a frequency is exact at once, folded
-- or not.

CREATE TABLE kb_term (
    kb_id BIGINT NOT NULL,
    term  TEXT   NOT NULL,
    df    BIGINT NOT NULL,
    PRIMARY KEY (kb_id, term)
);

CREATE TABLE kb_term_delta (
    id    BIGSERIAL PRIMARY KEY,
    kb_id BIGINT NOT NULL,
    term  TEXT   NOT NULL,
    d     BIGINT NOT NULL
);
CREATE INDEX kb_term_delta_kb_term_idx ON kb_term_delta (kb_id, term);

-- +1 per chunk added, -1 per chunk removed, per (kb, lexeme) and per kb (term ''); an UPDATE
-- appends only what it changed (a no-op update appends nothing).
CREATE FUNCTION rag_kb_term_delta() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO kb_term_delta (kb_id, term, d)
        SELECT n.kb_id, t.lexeme, count(*) FROM new_rows n, unnest(n.content_tsv) t GROUP BY 1, 2
        UNION ALL
        SELECT n.kb_id, '', count(*) FROM new_rows n GROUP BY 1;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO kb_term_delta (kb_id, term, d)
        SELECT o.kb_id, t.lexeme, -count(*) FROM old_rows o, unnest(o.content_tsv) t GROUP BY 1, 2
        UNION ALL
        SELECT o.kb_id, '', -count(*) FROM old_rows o GROUP BY 1;
    ELSE
        INSERT INTO kb_term_delta (kb_id, term, d)
        SELECT kb_id, term, sum(d) FROM (
            SELECT n.kb_id, t.lexeme AS term, 1 AS d FROM new_rows n, unnest(n.content_tsv) t
            UNION ALL SELECT n.kb_id, '', 1 FROM new_rows n
            UNION ALL SELECT o.kb_id, t.lexeme, -1 FROM old_rows o, unnest(o.content_tsv) t
            UNION ALL SELECT o.kb_id, '', -1 FROM old_rows o
        ) c GROUP BY 1, 2 HAVING sum(d) <> 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER document_chunk_kb_term_ins AFTER INSERT ON document_chunk
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rag_kb_term_delta();
CREATE TRIGGER document_chunk_kb_term_del AFTER DELETE ON document_chunk
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION rag_kb_term_delta();
CREATE TRIGGER document_chunk_kb_term_upd AFTER UPDATE ON document_chunk
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rag_kb_term_delta();

CREATE FUNCTION rag_kb_term_truncate() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE kb_term, kb_term_delta;
    RETURN NULL;
END
$$;

CREATE TRIGGER document_chunk_kb_term_trunc AFTER TRUNCATE ON document_chunk
    FOR EACH STATEMENT EXECUTE FUNCTION rag_kb_term_truncate();

-- Backfill. CREATE TRIGGER took a SHARE ROW EXCLUSIVE lock on document_chunk: no writer commits
-- between the triggers and this count (a writer waits for this migration's commit, then its
-- triggers append its change).
INSERT INTO kb_term (kb_id, term, df)
SELECT c.kb_id, t.lexeme, count(*) FROM document_chunk c, unnest(c.content_tsv) t GROUP BY 1, 2
UNION ALL
SELECT c.kb_id, '', count(*) FROM document_chunk c GROUP BY 1;
