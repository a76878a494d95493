"""Repositories, one module per aggregate (they replace the old ``shared.queries``)."""
