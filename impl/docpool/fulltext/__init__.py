"""The full-text engine of the storages without a ranking SQL engine of their own (FTS5's index
read into arrays on SQLite, Firebird's in-memory index): ``reader`` (postings, data only),
``rank`` (FTS5's bm25, exactly), ``snippet`` (FTS5's snippet) and ``search`` (the search layer
that ranks a storage's postings, or asks the storage's own engine when it has no postings)."""
