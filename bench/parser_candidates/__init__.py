"""Candidate parsers per format for ``bench/parsers.py``."""
