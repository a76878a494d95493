-- 0005: where each chunk came from (PDF page, 1-based; heading path of DOCX/HTML/Markdown), and
-- the warnings of a document's last indexing run (what was not indexed or was altered).
ALTER TABLE document_chunk
    ADD COLUMN page    INT CHECK (page IS NULL OR page >= 1),
    ADD COLUMN section TEXT;

ALTER TABLE document_info
    ADD COLUMN warnings JSONB NOT NULL DEFAULT '[]'::jsonb;
