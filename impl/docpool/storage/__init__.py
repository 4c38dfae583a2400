"""Pool storages behind one Protocol (``base.PoolStorage``): SQLite now, PostgreSQL and Firebird later."""
