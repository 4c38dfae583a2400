"""Contract areas a run did not judge, said loudly: a green run must not hide a whole skipped area.

An area is skipped when every case of its checks skipped (e.g. the document-pool content checks
without a pool fixture), when no call of a planned tool ever succeeded (its success shape was
never judged: only error envelopes were seen), or when the time budget or an interrupt cut cases. Each entry
says what to pass to judge it. ``--strict`` turns any skipped area into a failing run, except the
tools a target does not offer when ``--advertised-only`` declared that it implements a part.
"""

from __future__ import annotations

from knowspec.conformance.events import CheckFinished

REST_AREA = "REST IMPORTDOC"  # only an HTTP server has a REST surface

# check ids per named area, with what a user passes to have it judged
AREAS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("document-pool content", ("docpool_import", "docpool_import_answers", "docpool_import_acl",
                               "docpool_import_refusals"),
     "no pool fixture: start the target on `knowspec conform fixture --out DIR` and pass --pool-fixture DIR "
     "(stdio or HTTP), or over HTTP pass --rest-url with --admin-user and $KNOWSPEC_CONFORM_ADMIN_PASSWORD"),
    ("document-pool non-admin refusal", ("docpool_import_non_admin",),
     "pass --reader-user and $KNOWSPEC_CONFORM_READER_PASSWORD with the pool fixture"),
    (REST_AREA, ("rest_importdoc",), "pass --rest-url (and admin credentials)"),
    ("cancellation", ("cancellation",), "see the case's reason"),
)
BUDGET = "time budget exhausted"
STALE_CHECK = "a check written for another contract revision"  # CheckContext.fitted: the suite's side
NOT_ADVERTISED = "not in the target's tools/list; --advertised-only judges only the tools it offers"
UNOFFERED_AREA = "tools the target does not offer"            # declared by --advertised-only
UNLISTED_AREA = "contract tools missing from the target's tools/list"  # and tools_list did not fail them


def strict_failing(areas: tuple[tuple[str, str], ...], stdio: bool) -> tuple[tuple[str, str], ...]:
    """The skipped areas that fail a ``--strict`` run: not the tools ``--advertised-only``
    declared left out, nor, for a stdio target, the REST surface (an MCP server over stdio has
    none to judge: ``--family all --strict`` over stdio could never have passed)."""
    return tuple((area, why) for area, why in areas
                 if area != UNOFFERED_AREA and not (stdio and area == REST_AREA))


def skipped_areas(results: tuple[CheckFinished, ...] | list[CheckFinished], unlisted: tuple[str, ...] = (),
                  declared: bool = False, not_run: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, str]]:
    """``(area, why)`` for every area the run planned but did not judge. ``unlisted``: the judged
    contract tools the target's tools/list lacks; ``declared``: --advertised-only said so;
    ``not_run``: the planned (check, tool) cases an interrupt left without a result.

    An area or tool whose cases were cut (by the interrupt or the time budget) gets no advice
    about fixtures or data: it was not judged because the run ended, which its own line says.
    """
    out: list[tuple[str, str]] = []
    cut = [r for r in results if r.status == "skipped" and r.reason.startswith(BUDGET)]
    ended_early = {*not_run, *((r.check_id, r.tool) for r in cut)}
    cut_checks, cut_tools = {c for c, _ in ended_early}, {t for _, t in ended_early if t}
    for area, checks, hint in AREAS:
        cases = [r for r in results if r.check_id in checks]
        if cut_checks.intersection(checks):
            continue
        if cases and all(r.status == "skipped" for r in cases):
            reason = cases[0].reason
            out.append((area, f"{hint} ({reason[:160]})" if reason else hint))
    tools: dict[str, list[CheckFinished]] = {}
    for r in results:
        if r.tool:
            tools.setdefault(r.tool, []).append(r)
    for tool, cases in sorted(tools.items()):
        if tool in cut_tools:
            continue
        ran = [r for r in cases if r.calls]
        if ran and not any(r.successes for r in cases) and not any(r.status in ("failed", "error") for r in cases):
            codes = sorted({code for r in cases for code in r.error_codes})
            out.append((f"successful results of {tool}",
                        f"no call succeeded (every answer was an error: {', '.join(codes) or 'none seen'}), so only "
                        "error envelopes were judged: if the tool works, give the target data the calls can "
                        "succeed on (the doc and help tools: a target started on `knowspec conform fixture --out "
                        "DIR` and --pool-fixture DIR; the OKF tools: a --bundle-dir the target may read)"))
    reported = {r.tool for r in results if r.check_id == "tools_list" and r.status in ("failed", "error", "accepted")}
    unjudged = [name for name in unlisted if name not in reported]
    if unjudged and declared:
        out.append((UNOFFERED_AREA, f"{len(unjudged)} tool(s) not judged, as --advertised-only asked: "
                                    + ", ".join(unjudged)))
    elif unjudged:
        out.append((UNLISTED_AREA, f"{len(unjudged)} tool(s) not judged: {', '.join(unjudged)} (the check "
                                   "tools_list, which fails them, did not run; pass --advertised-only if the "
                                   "target implements a part of the contract)"))
    stale = sorted({r.case_id for r in results if r.status == "skipped" and r.reason.startswith(STALE_CHECK)})
    if stale:
        out.append((f"{len(stale)} case(s) of {STALE_CHECK}",
                    f"the suite's own calls do not fit the judged contract: {', '.join(stale[:8])}"
                    f"{' …' if len(stale) > 8 else ''} (see each case's reason)"))
    if cut:
        out.append((f"{len(cut)} case(s) cut by the time budget", "raise --time-budget"))
    if not_run:
        out.append((f"{len(not_run)} case(s) not run", f"the run was interrupted (Ctrl-C or SIGTERM) before them: "
                                                       f"run again to judge {_areas_of(not_run)}"))
    return out


def _areas_of(cases: tuple[tuple[str, str], ...]) -> str:
    tools = sorted({t for _, t in cases if t})
    checks = sorted({c for c, t in cases if not t})
    named = [*tools[:8], *(["…"] if len(tools) > 8 else []), *checks[:4], *(["…"] if len(checks) > 4 else [])]
    return "them (" + ", ".join(named) + ")" if named else "them"
