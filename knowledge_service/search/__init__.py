"""Search over the indexed chunks (API only): retrieval and ranking."""
