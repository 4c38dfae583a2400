"""Handler arguments for tests that call a handler directly: the generated input model.

The pipeline builds ``entry.input_model`` from the validated JSON arguments; a test does the
same, so a handler never sees a shape the server would not give it. ``None`` means omitted.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from knowspec.generated.registry import BY_NAME


def tool_args(tool: str, **arguments: Any) -> BaseModel:
    model = BY_NAME[tool].input_model
    return model.model_validate({name: value for name, value in arguments.items() if value is not None})


def unchecked_args(tool: str, **arguments: Any) -> BaseModel:
    """The input model built without validation, for tests of a handler's own defence in depth
    against input the schema refuses (the pipeline never passes such a model on)."""
    model = BY_NAME[tool].input_model
    return model.model_construct(**{name: value for name, value in arguments.items() if value is not None})
