"""The approval inbox."""
