"""The full-text engine of every storage: ``reader`` (postings, data only: SQLite's FTS5 index
read into arrays, or an in-memory index of a storage's chunk rows), ``rank`` (FTS5's bm25,
exactly), ``snippet`` (FTS5's snippet) and ``search`` (the one layer that ranks a storage's
postings; no storage ranks)."""
