"""Hand-written logic behind the generated tool registry (installed as ``knowspec.impl``)."""
