"""Answer and relation metrics."""
