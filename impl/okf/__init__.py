"""OKF bundles: snapshots, parsing, the bundle model and the 14 tools."""
