-- 0021: a search hit's copies found by their text's MD5 (issue 30, item 4).
--
-- The search lists, per hit, the other chunks of its KB holding the same text (issue 29, `also_in`).
-- They were found by the hit's four rarest lexemes (one kb_term look-up per lexeme of the hit, then
-- the GIN index), about 8 ms of a 9 ms keyword request on a KB of 3,700 chunks (bench/RESULTS.md,
-- "search-load"). Equal texts have equal MD5s: this index finds them in one probe per hit, and the
-- statement still checks the KB and compares the texts themselves (an MD5 is a de-duplication key, not a
-- proof). Not (kb_id, md5): with kb_id first, the keyword statement (sequential scans off) would take it to
-- read every chunk of the KB instead of the (kb_id, content_tsv) GIN index.

CREATE INDEX document_chunk_md5_idx ON document_chunk (md5(content));
