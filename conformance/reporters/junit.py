"""JUnit XML: one testsuite per check, one testcase per (check, tool)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from knowspec.conformance.causes import shared_causes
from knowspec.conformance.events import RunFinished
from knowspec.conformance.reporters import report_path


class JunitReporter:
    def __init__(self, path: Path) -> None:
        self.path = report_path(path)

    def handle(self, event: Any) -> None:
        if isinstance(event, RunFinished):
            self.path.write_bytes(render(event))


def render(finished: RunFinished) -> bytes:
    root = ET.Element("testsuites", name="knowspec-conformance", time=f"{finished.duration:.3f}")
    suites: dict[str, ET.Element] = {}
    if finished.unreachable:  # no check ran: one errored case says why, never an empty report
        suite = ET.SubElement(root, "testsuite", name="target", tests="1", failures="0", errors="1", skipped="0")
        case = ET.SubElement(suite, "testcase", classname="conformance.target", name="reachable", time="0.000")
        ET.SubElement(case, "error", message=finished.unreachable[:500], type="unreachable")
    if finished.interrupted:  # the cases below are only those that finished before the signal
        suite = ET.SubElement(root, "testsuite", name="run", tests="1", failures="0", errors="1", skipped="0")
        case = ET.SubElement(suite, "testcase", classname="conformance.run", name="complete", time="0.000")
        ET.SubElement(case, "error", message=finished.interrupted[:500], type="interrupted")
    if finished.strict_failed:  # --strict: each area it left unjudged fails, or CI would read a failed run as green
        suite = ET.SubElement(root, "testsuite", name="strict", tests=str(len(finished.strict_failed)),
                              failures=str(len(finished.strict_failed)), errors="0", skipped="0")
        for area, why in finished.strict_failed:
            case = ET.SubElement(suite, "testcase", classname="conformance.strict", name=area, time="0.000")
            ET.SubElement(case, "failure", message=f"--strict: area not judged: {why}"[:500], type="strict")
    groups = {case: g for g in shared_causes(finished.results) for case in g.cases}
    for r in finished.results:
        suite = suites.get(r.check_id)
        if suite is None:
            suite = suites[r.check_id] = ET.SubElement(root, "testsuite", name=r.check_id)
        case = ET.SubElement(suite, "testcase", classname=f"conformance.{r.check_id}",
                             name=r.tool or "(server)", time=f"{r.duration:.3f}")
        if r.status == "failed" and r.failure:
            node = ET.SubElement(case, "failure", message=r.failure.message[:500], type=r.check_id)
            details = r.failure.to_dict()
            if r.case_id in groups:  # the fault many cases share: fixing it clears them all
                g = groups[r.case_id]
                details["shared_cause"] = f"{g.cause.summary} ({len(g.cases)} failures share it)"
            node.text = json.dumps(details, indent=2, ensure_ascii=False)
        elif r.status == "error" and r.failure:
            ET.SubElement(case, "error", message=r.failure.message[:500], type="error")
        elif r.status == "info":
            ET.SubElement(case, "system-out").text = f"info: {r.reason}"
        elif r.status in ("skipped", "accepted"):
            reason = r.reason or (f"accepted by baseline: {r.failure.message[:300]}" if r.failure else r.status)
            ET.SubElement(case, "skipped", message=reason[:500])
    for name, suite in suites.items():
        cases = [r for r in finished.results if r.check_id == name]
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(r.status == "failed" for r in cases)))
        suite.set("errors", str(sum(r.status == "error" for r in cases)))
        suite.set("skipped", str(sum(r.status in ("skipped", "accepted") for r in cases)))
    for total in ("tests", "failures", "errors", "skipped"):  # the run's totals, as CI dashboards read them
        root.set(total, str(sum(int(s.get(total, "0")) for s in root.findall("testsuite"))))
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
