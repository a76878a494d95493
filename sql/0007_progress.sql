-- 0007: live progress of an indexing run (issue 12). `stage` is where the current claim is
-- (DOWNLOADING, PARSING, CHUNKING, EMBEDDING, WRITING; for a FAILED/TIMEOUT task, where it
-- stopped; NULL before the first claim of a generation); `progress` is the share of the run's
-- chunks embedded (0..1; 1 from WRITING on). Written by the worker only under its current
-- (generation, attempt) claim, at most about once per second (task_service/progress.py).
ALTER TABLE index_task
    ADD COLUMN stage    TEXT CHECK (stage IN ('DOWNLOADING', 'PARSING', 'CHUNKING', 'EMBEDDING', 'WRITING')),
    ADD COLUMN progress REAL CHECK (progress >= 0 AND progress <= 1);
