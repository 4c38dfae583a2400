"""Code generator: spec/ -> generated/ (installed as knowspec.codegen)."""
