"""A bundle on disk: bundle paths, capture into immutable snapshots, watches, the OKF version."""
