"""``python -m rag_cli``: the ``rag`` command."""

from rag_cli import main

main()
