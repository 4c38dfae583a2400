"""search_concepts and search_sections: matching rules and per-snapshot indexes."""
