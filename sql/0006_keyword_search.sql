-- 0006: full-text (keyword) search over chunks, next to vector search (hybrid search, issue 9).
--
-- One language-neutral configuration for every document: `rag_simple` is PostgreSQL's `simple`
-- (lower-case, no stemming, no stop words: identifiers, names and codes stay as they are) with
-- `unaccent` in front, so "café" and "cafe" meet. Text goes through `rag_search_text` first:
--   * each CJK ideograph / kana becomes its own token (the parser sees a run of them as one
--     "word": "人人生而自由" would only match itself); queries are cut the same way and a
--     phrase match of the whole query is rewarded at query time;
--   * a hyphen in front of a digit inside an identifier becomes a space: the parser reads
--     "XK-4471" as 'xk' and the signed integer '-4471', so "4471" alone would not match.
-- Queries use the same function and configuration (knowledge_service/search/retrieval.py).
CREATE EXTENSION IF NOT EXISTS unaccent;

CREATE TEXT SEARCH CONFIGURATION rag_simple (COPY = pg_catalog.simple);
ALTER TEXT SEARCH CONFIGURATION rag_simple
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part,
                      numword, numhword, hword_numpart
    WITH unaccent, simple;

CREATE FUNCTION rag_search_text(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN regexp_replace(
        regexp_replace(t, '([[:alnum:]])-([0-9])', '\1 \2', 'g'),
        '([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])', ' \1 ', 'g');

ALTER TABLE document_chunk
    ADD COLUMN content_tsv tsvector
        GENERATED ALWAYS AS (to_tsvector('rag_simple'::regconfig, rag_search_text(content))) STORED;

CREATE INDEX document_chunk_content_tsv_idx ON document_chunk USING gin (content_tsv);
