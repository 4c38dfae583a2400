"""Pure rules shared by every backend: folding, tokenising, bm25, snippets, RRF, ordering, truncation."""
