-- 0012: stage OCR (issue 22): a run OCRing scanned pages reports stage 'OCR' with progress = pages
-- done / pages to OCR, between PARSING and CHUNKING.
ALTER TABLE index_task DROP CONSTRAINT IF EXISTS index_task_stage_check;
ALTER TABLE index_task
    ADD CONSTRAINT index_task_stage_check
    CHECK (stage IN ('DOWNLOADING', 'PARSING', 'OCR', 'CHUNKING', 'EMBEDDING', 'WRITING'));
