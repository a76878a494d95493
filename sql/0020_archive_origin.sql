-- 0020: archives expand into documents (issue 29, item 3; ARCHITECTURE.md "Flow 4: an archive").
--
-- A member of an archive is a document of its own, in the archive's KB; it names its origin:
--   origin_document_id  the archive's document (NULL for an upload, and once the archive is
--                       deleted: its members stay documents of their own)
--   origin_member       the member's path in the archive (its first file name; the file name may
--                       change later with a content replacement, this does not)
-- The unique index makes a member exist once per archive whatever the deliveries (a reindex of the
-- archive re-plans: members already there are skipped by the worker's one transaction) and is the
-- index the archive's member count and the ON DELETE SET NULL use.

ALTER TABLE document_info
    ADD COLUMN origin_document_id BIGINT NULL REFERENCES document_info (id) ON DELETE SET NULL,
    ADD COLUMN origin_member TEXT NULL,
    ADD CONSTRAINT document_info_origin_pair CHECK ((origin_document_id IS NULL) OR (origin_member IS NOT NULL));
CREATE UNIQUE INDEX document_info_origin_member_uniq ON document_info (origin_document_id, origin_member)
    WHERE origin_document_id IS NOT NULL;
