"""Concepts as a graph: get_neighbors navigation and the get_semantic_graph JSON-LD documents."""
