"""The fixture model writes what its fields say: the traps the oracles rely on reach the files."""

from __future__ import annotations

import yaml

from knowspec.conformance.fixtures.model import Concept, Event, Source, render_frontmatter


def test_plain_times_are_written_as_yaml_timestamps_but_a_bare_date_timestamp_stays_quoted():
    concept = Concept("c", plain_times=True, stale_after="2025-03-01", timestamp="2025-01-02",
                      generated=Event("writer/1.0", "2025-01-02T03:04:05Z"), usage_window=("2025-01-01", "2025-12-31"),
                      sources=(Source("https://example.com/a", last_modified="not a date"),))
    loaded = yaml.safe_load(render_frontmatter(concept))
    assert str(loaded["stale_after"]) == "2025-03-01" and not isinstance(loaded["stale_after"], str)
    assert not isinstance(loaded["generated"]["at"], str) and not isinstance(loaded["usage_window"]["from"], str)
    assert loaded["timestamp"] == "2025-01-02" and loaded["sources"][0]["last_modified"] == "not a date"
