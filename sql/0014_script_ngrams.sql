-- 0014: keyword search in every script (issue 17). Thai, Lao, Khmer and Myanmar are written
-- without spaces between words and Korean attaches particles to words ("서울에서"), so
-- PostgreSQL's parser made one token of a whole run and a word inside it matched nothing.
--
-- Runs of those scripts, and of CJK (Han, kana), are cut into overlapping character n-grams:
-- each character as a unigram and each pair of neighbours as a bigram, in reading order
-- ("서울에서" → "서 서울 울 울에 에 에서 서"), as Lucene's CJKBigramFilter with outputUnigrams.
-- Queries go through the same function, so a query's token sequence is a contiguous part of a
-- chunk's exactly when the query is a substring of it: the phrase match (+1 in the keyword
-- score) finds a word anywhere inside a run, a one-character word ("책", "书") still matches its
-- unigram, and the bigrams (rarer than single characters) carry most of the term weight.
-- Chosen by measured recall@5 and speed against dictionary word break (ICU, pythainlp) and
-- bigrams without unigrams: bench/RESULTS.md, section "retrieval", "Script recall".
--
-- Ranges: Thai + Lao U+0E00-U+0EFF, Myanmar U+1000-U+109F (+ extended A9E0-A9FF, AA60-AA7F),
-- Khmer U+1780-U+17FF (+ symbols 19E0-19FF), Hangul jamo U+1100-U+11FF, compatibility jamo
-- U+3130-U+318F, jamo extended A960-A97F and D7B0-D7FF, syllables U+AC00-U+D7AF; kana
-- U+3040-U+30FF, CJK ideographs U+3400-U+4DBF, U+4E00-U+9FFF, U+F900-U+FAFF (as in 0006).
--
-- The tsvector of existing chunks is recomputed: the generated column is dropped and added
-- again (a rewrite of document_chunk under an exclusive lock; measured in bench/RESULTS.md).

ALTER TABLE document_chunk DROP COLUMN content_tsv;  -- drops document_chunk_content_tsv_idx too

-- Three passes over the text (after 0006's identifier rule): a space on both sides of each run;
-- every character followed by one of the run becomes "x x" (its unigram, and a copy that forms
-- the bigram with the next character); each bigram "xy" so formed becomes "xy y" (the next
-- character's unigram). "abcd" → "a ab b bc c cd d". Text without these scripts is unchanged.
CREATE OR REPLACE FUNCTION rag_search_text(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN regexp_replace(regexp_replace(regexp_replace(
        regexp_replace(t, '([[:alnum:]])-([0-9])', '\1 \2', 'g'),
        '([\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff]+)',
        ' \1 ', 'g'),
        '([\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff])(?=[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff])',
        '\1 \1', 'g'),
        '([\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff])([\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff])',
        '\1\2 \2', 'g');

ALTER TABLE document_chunk
    ADD COLUMN content_tsv tsvector
        GENERATED ALWAYS AS (to_tsvector('rag_simple'::regconfig, rag_search_text(content))) STORED;

CREATE INDEX document_chunk_content_tsv_idx ON document_chunk USING gin (content_tsv);

ANALYZE document_chunk;  -- the keyword ranking reads term frequencies from pg_stats of content_tsv
