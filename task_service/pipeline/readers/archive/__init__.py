"""Archives (``.zip``, ``.tar``, ``.tar.gz``): not a document of their own but a set of member files.

``plan.py`` decides, from the archive's directory alone (ZIP central directory, tar headers), which
members become documents, which are reported as skipped, and whether the archive is refused
whole (limits: member count, declared sizes, compression ratio) before any member is inflated;
then it yields the accepted members' bytes, each bounded by its declared size. The fan-out into
documents is described in ARCHITECTURE.md ("Flow 4: an archive").
"""
