-- 0019: words between < and > are words (issue 29, item 6). PostgreSQL's default parser reads
-- "<placeholder>", "<inline-image>", "<username>" and the "<Order>" of "List<Order>" as `tag`
-- tokens, and an "&amp;" as an `entity`, and the text search configuration indexes nothing of
-- either (ts_debug: no lexeme): such a word was in no keyword index. rag_search_text, which both
-- the chunks' tsvector and every query go through, now turns "<" and ">" into spaces and an
-- entity "&name;" into its name, before 0014's rules (kept as they are): "List<Order> code" →
-- list, order, code. tests/integration/test_search_text.py checks every token type of the
-- default parser (ts_token_type('default')): each word of each type has a lexeme and is found.
--
-- The tsvector of existing chunks is recomputed (the generated column dropped and added again,
-- as in 0014: a rewrite of document_chunk under an exclusive lock), with its (kb_id,
-- content_tsv) index (0015), and the per-KB term statistics of 0018 are counted again from it
-- (a rewrite fires no trigger; the lock keeps writers out until this commits).

CREATE OR REPLACE FUNCTION rag_search_text(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN regexp_replace(regexp_replace(regexp_replace(
        regexp_replace(
            regexp_replace(regexp_replace(t, '[<>]', ' ', 'g'), '&(#?[[:alnum:]]+);', ' \1 ', 'g'),
            '([[:alnum:]])-([0-9])', '\1 \2', 'g'),
        '([\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff]+)',
        ' \1 ', 'g'),
        '([\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff])(?=[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff])',
        '\1 \1', 'g'),
        '([\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff])([\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff])',
        '\1\2 \2', 'g');

ALTER TABLE document_chunk DROP COLUMN content_tsv;  -- drops document_chunk_kb_tsv_idx too

ALTER TABLE document_chunk
    ADD COLUMN content_tsv tsvector
        GENERATED ALWAYS AS (to_tsvector('rag_simple'::regconfig, rag_search_text(content))) STORED;

CREATE INDEX document_chunk_kb_tsv_idx ON document_chunk USING gin (kb_id, content_tsv);

DELETE FROM kb_term_delta;
DELETE FROM kb_term;
INSERT INTO kb_term (kb_id, term, df)
SELECT c.kb_id, t.lexeme, count(*) FROM document_chunk c, unnest(c.content_tsv) t GROUP BY 1, 2
UNION ALL
SELECT c.kb_id, '', count(*) FROM document_chunk c GROUP BY 1;

ANALYZE document_chunk;
