"""Event consumers: console progress and the JUnit, JSON, HTML and baseline files."""
