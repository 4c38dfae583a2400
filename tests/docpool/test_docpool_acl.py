"""The ACL matrix: callers (users, roles, '*', case variants) x collections x every tool.

The oracle is independent of the storage: it reads each sample topic's ``acl:`` frontmatter and
applies the seed's rule (collection 'herkes', or a principal in {user, roles..., *} compared
ASCII case-insensitively; stdio sees everything).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from docpool_sample import GENEL_TOPICS, PUBLIC, RESTRICTED, call, make_env, sample_topics
from knowspec.impl.context import Caller
from knowspec.impl.errors import ToolError

TOPICS = sample_topics()
PUBLIC_SLUGS = {"genel-duyuru", "tatil-takvimi"}
assert len(GENEL_TOPICS) == len(PUBLIC_SLUGS)


def _ascii_lower(s: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def visible(caller: Caller) -> set[tuple[str, str]]:
    """(collection, slug) pairs the caller may see, by the seed's rule."""
    out = {(PUBLIC, s) for s in PUBLIC_SLUGS}
    names = {_ascii_lower(n) for n in (caller.user, *caller.roles, "*")}
    for slug, front in TOPICS.items():
        if caller.unrestricted or any(_ascii_lower(p) in names for p in front.get("acl", [])):
            out.add((RESTRICTED, slug))
    return out


CALLERS = {
    "stdio": Caller(),
    "plain-user": Caller("zeynep", (), unrestricted=False),
    "role-ik": Caller("ali", ("ik",), unrestricted=False),
    "role-IK-upper": Caller("ali", ("IK",), unrestricted=False),
    "role-muhasebe": Caller("veli", ("muhasebe",), unrestricted=False),
    "role-Muhasebe-mixed": Caller("veli", ("MuHaSeBe",), unrestricted=False),
    "user-is-sysadmin": Caller("sysadmin", (), unrestricted=False),
    "turkish-dotted-I": Caller("İK", ("İk",), unrestricted=False),   # not ASCII: must not match 'ik'
    "many-roles": Caller("ayse", ("Muhasebe", "SYSADMIN", "ik"), unrestricted=False),
}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return make_env(tmp_path_factory.mktemp("acl"))


def test_oracle_covers_restricted_and_open_cases():
    seen = {name: len(visible(c)) for name, c in CALLERS.items()}
    assert seen["stdio"] > seen["many-roles"] > seen["role-ik"] > seen["plain-user"] > len(PUBLIC_SLUGS)
    assert seen["turkish-dotted-I"] == seen["plain-user"]


@pytest.mark.parametrize("name", list(CALLERS))
def test_search_get_links_related_and_counts_respect_acl(env, name):
    caller = CALLERS[name]
    ctx = env.ctx(caller)
    allowed = visible(caller)
    # search: every topic's title finds only allowed topics; allowed ones are findable
    for slug, front in TOPICS.items():
        hits = call("doc_search", ctx, query=front["title"], limit=50)
        found = {(h["collection"], h["slug"]) for h in hits}
        assert found <= allowed
        assert ((RESTRICTED, slug) in found) == ((RESTRICTED, slug) in allowed)
    # get by slug: forbidden answers exactly like missing
    for slug in TOPICS:
        if (RESTRICTED, slug) in allowed:
            topic = call("doc_get", ctx, slug=slug, collection=RESTRICTED)
            assert {(RESTRICTED, r["slug"]) for r in topic["related"]} <= allowed
        else:
            with pytest.raises(ToolError) as err:
                call("doc_get", ctx, slug=slug, collection=RESTRICTED)
            assert (err.value.code, err.value.message) == ("not_found", f"topic not found ({slug})")
    # links and entity topic counts
    for form in ("TfrmBordro", "TfrmKullanici", "TfrmFatura"):
        try:
            rows = call("doc_links", ctx, kind="form_class", key=form)
        except ToolError as err:
            assert err.code == "not_found"
            rows = []
        assert {(r["collection"], r["slug"]) for r in rows} <= allowed
        expected = {(RESTRICTED, s) for s, f in TOPICS.items()
                    if any(l.get("key") == form for l in f.get("links", []))} & allowed
        assert {(r["collection"], r["slug"]) for r in rows} == expected
        assert call("doc_entity", ctx, kind="form_class", key=form)["topics"] == len(expected)
    # counts and collections
    stats = call("doc_stats", ctx)
    assert stats["counts"]["topic"] == len(allowed)
    per = {r["id"]: r["topics"] for r in call("doc_collections", ctx)}
    assert per.get(RESTRICTED, 0) == len({s for c, s in allowed if c == RESTRICTED})
    acl_rows = sum(len(TOPICS[s].get("acl", [])) for c, s in allowed if c == RESTRICTED)
    assert stats["counts"]["acl"] == acl_rows


def test_limit_one_returns_an_allowed_topic_when_the_best_is_forbidden(env):
    best_any = call("doc_search", env.ctx(), query="bordro", collection=RESTRICTED, limit=50)
    top = (best_any[0]["collection"], best_any[0]["slug"])
    caller = next(c for c in CALLERS.values()
                  if top not in visible(c) and any((h["collection"], h["slug"]) in visible(c) for h in best_any))
    hits = call("doc_search", env.ctx(caller), query="bordro", collection=RESTRICTED, limit=1)
    assert len(hits) == 1
    assert (hits[0]["collection"], hits[0]["slug"]) in visible(caller)


def test_help_tools_ignore_acl(env):
    """The help pool has no authorization check."""
    ctx = env.ctx(CALLERS["plain-user"])
    assert call("help_get_topic", ctx, slug="kullanici-yonetimi")["slug"] == "kullanici-yonetimi"
    assert call("help_stats", ctx)["counts"]["topic"] == len(TOPICS)


NAMES = ["ik", "IK", "Ik", "muhasebe", "MUHASEBE", "sysadmin", "SysAdmin", "İk", "x", "*"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user=st.sampled_from(NAMES), roles=st.lists(st.sampled_from(NAMES), max_size=3),
       query=st.sampled_from(["bordro", "kullanıcı", "fatura", "maaş rapor", "parola", "rol"]))
def test_search_results_equal_unrestricted_results_filtered(env, user, roles, query):
    caller = Caller(user, tuple(roles), unrestricted=False)
    everything = call("doc_search", env.ctx(), query=query, limit=50)
    mine = call("doc_search", env.ctx(caller), query=query, limit=50)
    allowed = visible(caller)
    assert [(h["collection"], h["slug"]) for h in mine] == \
        [(h["collection"], h["slug"]) for h in everything if (h["collection"], h["slug"]) in allowed]
