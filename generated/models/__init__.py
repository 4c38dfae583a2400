"""Pydantic v2 models generated from spec/ by datamodel-code-generator."""
