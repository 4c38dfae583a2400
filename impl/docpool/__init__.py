"""Help and document pools: catalog, storages, ACL, import, builder, vectors and the 11 tools."""
