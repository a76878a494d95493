"""PDF reader: the pypdfium2 text layer, a block per page, and OCR for scanned pages
(``task_service/pipeline/pdf.py``'s ``read``, under ``limits``)."""

from __future__ import annotations

from task_service.pipeline.pdf import read

__all__ = ["read"]
