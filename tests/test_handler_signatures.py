"""Every registry handler takes its generated input model as the typed first parameter.

mypy checks ``impl/handler_bindings.py`` against the generated protocols, but ``args: Any`` would
satisfy a protocol too; this test closes that gap at run time, on the registry itself.
"""

from __future__ import annotations

import inspect
import typing

import pytest

from knowspec.generated import handlers as protocols
from knowspec.generated.registry import TOOLS
from knowspec.impl import handler_bindings
from knowspec.impl.context import CallContext, ToolOutput
from knowspec.impl.server.pipeline import resolve_handler


@pytest.mark.parametrize("entry", TOOLS, ids=[e.name for e in TOOLS])
def test_first_parameter_is_the_generated_input_model(entry):
    handler = resolve_handler(entry)
    assert handler is not None
    hints = typing.get_type_hints(handler)
    first, second = list(inspect.signature(handler).parameters)
    assert hints[first] is entry.input_model
    assert hints[second] is CallContext and hints["return"] is ToolOutput


def test_the_bindings_cover_the_registry_with_its_own_handlers():
    bound = {e.name: getattr(handler_bindings, e.name, None) for e in TOOLS}
    assert bound == {e.name: resolve_handler(e) for e in TOOLS}
    assert set(protocols.HANDLER_PROTOCOLS) == {e.name for e in TOOLS}
