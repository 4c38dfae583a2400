"""A value is written plain only when PyYAML's own (pure-Python) safe loader reads it back as the
same string: the faster libyaml loader may decide instead only where the two agree."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl.okf.write import yaml_text

# characters and words that end, quote, escape or retype a plain scalar, and line-break look-alikes
PIECES = st.sampled_from(list("ab1 .:-#'\"[]{},&*!|>%@`?~=\t\\/\r\x0b\x0c\x85\u2028\xa0\ufeff\x7f\x01é😀")
                         + ["yes", "no", "on", "null", "true", "0x1", "1e3", "2024-01-02", "<<"])
ONE_LINE = st.lists(PIECES, min_size=1, max_size=8).map("".join).map(str.strip).filter(lambda t: t and "\n" not in t)


def _reads_back(loader: type, text: str) -> bool:
    try:
        return yaml.load(f"k: {text}\n", Loader=loader) == {"k": text}
    except yaml.YAMLError:
        return False


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(ONE_LINE)
def test_the_loader_chosen_reads_a_value_as_pyyaml_itself_does(text):
    assert _reads_back(yaml_text._yaml_11_loader(text), text) == _reads_back(yaml.SafeLoader, text)


def test_libyaml_reads_a_tab_in_a_plain_scalar_where_pyyaml_refuses_it():
    """Why the choice exists; should a libyaml release stop differing, the choice can go."""
    assert _reads_back(yaml.CSafeLoader, "b\t\tb") and not _reads_back(yaml.SafeLoader, "b\t\tb")
