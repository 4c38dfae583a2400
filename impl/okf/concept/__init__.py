"""What a concept's fields mean: IDs, relations, the typed projection, temporal profiles."""
