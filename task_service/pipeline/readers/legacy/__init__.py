"""Legacy Office binaries (Word, Excel, PowerPoint 97-2003 and their templates): OLE2 compound files.

One module per format: ``doc`` (our reader of the WordDocument stream's piece table, [MS-DOC]),
``xls`` (python-calamine, the XLSX reader's library, over the BIFF ``Workbook`` stream), ``ppt``
(our walker of the PowerPoint Document stream's text records, [MS-PPT]). Chosen by measurement
against LibreOffice headless, antiword, catdoc, catppt, xls2csv and xlrd (``python -m
bench.legacy_readers``, bench/RESULTS.md "legacy-readers"). Every module first asks
``shared.domain.ole.classify_ole`` what the file is: a password-protected one is ``encrypted``,
another OLE kind than its name says is ``unsupported_type`` naming what it is.
"""
