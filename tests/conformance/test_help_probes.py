"""The help tools' probe calls come from the target's own help pool (``help_probe_values``):
found by searching from its collection titles and then from the words of each hit, the same
values on every run, so the help tools' success shapes never depend on a lucky generated name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knowspec.conformance.checks.common import help_probe_values, probe_calls
from knowspec.conformance.checks.registry import BundleStore, CheckContext
from knowspec.conformance.config import RunConfig
from knowspec.conformance.contract import load_contract
from knowspec.conformance.target import CallOutcome

CONTRACT = load_contract()
TOPICS = [  # (slug, title, snippet, module, form class): reachable only word by word from "Acme Help"
    ("start", "Acme start page", "Open the Invoice screen first", None, None),
    ("invoice", "Invoice entry", "Invoice lines and totals", "SALES", "TfrmInvoice"),
    ("stock", "Stock cards", "Totals per warehouse", "STOCK", "TfrmStock"),
]


class HelpPool:
    """A target connection answering help_stats and help_search over ``TOPICS``."""

    def __init__(self) -> None:
        self.searched: list[str] = []

    def call(self, name: str, arguments: Any, timeout: float) -> CallOutcome:
        if name == "help_stats":
            body = {"collections": {"acme": {"title": "Acme Help"}}}
        elif name == "help_search":
            query = arguments["query"].lower()
            self.searched.append(query)
            body = {"results": [{"slug": s, "title": t, "breadcrumb": "", "snippet": sn, "score": 1.0, "module": m,
                                 "form_class": f} for s, t, sn, m, f in TOPICS
                                if query in t.lower().split() or query in sn.lower().split()]}
        else:
            return CallOutcome(arguments, is_error=True, raw={"isError": True})
        return CallOutcome(arguments, structured=body, raw={"structuredContent": body})


def context(conn: HelpPool, tool_name: str) -> CheckContext:
    tool = next(t for t in CONTRACT.tools if t.name == tool_name)
    advertised = {t.name: {"name": t.name} for t in CONTRACT.tools}
    return CheckContext(conn, CONTRACT, RunConfig(target="stdio:x"), advertised, BundleStore(Path("/nonexistent")),
                        tool)


def test_help_probes_reach_every_form_from_the_collection_titles_word_by_word():
    values = help_probe_values(context(HelpPool(), "help_form_info"))
    assert {v["form_class"] for v in values if "form_class" in v} == {"TfrmInvoice", "TfrmStock"}
    assert {v["slug"] for v in values if "slug" in v} == {"start", "invoice", "stock"}


def test_help_probes_are_the_same_on_every_run_and_bounded():
    first, again = HelpPool(), HelpPool()
    assert help_probe_values(context(first, "help_search")) == help_probe_values(context(again, "help_search"))
    assert first.searched == again.searched
    assert len(first.searched) <= 12 and len(set(first.searched)) == len(first.searched)


def test_help_form_info_probes_name_the_forms_the_pool_has():
    calls = probe_calls(context(HelpPool(), "help_form_info"))
    assert {"form_class": "TfrmInvoice"} in calls and {"form_class": "TfrmStock"} in calls
