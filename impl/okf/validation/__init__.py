"""validate_bundle: base diagnostics, reserved-file rules, strict checks."""
