"""``python -m knowledge_service.cli``: the ``rag`` command."""

from knowledge_service.cli import main

main()
