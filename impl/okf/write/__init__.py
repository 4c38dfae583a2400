"""OKF write side: the transactional store, lossless frontmatter patches and plan digests.

Pure planning (no I/O):
- ``encoding``: length-prefixed binary framing and ``sha256:`` digest strings;
- ``paths``: revision-path grammar and the concept-id rules a writer enforces;
- ``revision``: the bundle revision over revision-visible files;
- ``changeset``: operations, canonical change-set bytes, request digest, minted ids;
- ``plan``: the ``Plan``, plan digest, idempotency keys, bounded whole-file diff;
- ``document``: byte-exact frontmatter/body spans;
- ``yaml_text`` / ``yaml_edit``: fail-closed YAML composition and surgical text edits;
- ``patch`` / ``computation_body``: the nine lossless patch operations;
- ``planner``: operations over a snapshot overlay plus whole-bundle staged validation -> ``Plan``;
- ``temporal``: date -> instant upgrade planning;
- ``citations`` / ``migration_citations``: legacy ``# Citations`` -> ``sources`` + keyed footnotes;
- ``migration_source`` / ``migration_plan``: the v0.1 -> v0.2 source tuple, plan and proof;
- ``inputs``: argument checks beyond the JSON Schema.

I/O at the edge:
- ``rootfs`` / ``atomic``: descriptor-relative, no-follow capture and durable file primitives;
- ``lock`` / ``journal`` / ``receipts`` / ``store``: writer and publication locks, journal with a
  durable boundary and recovery, commit receipts, compare-and-swap commit with replay;
- ``readers``: reads that finish interrupted commits first and never see a half-published one;
- ``bundle_io`` / ``store_errors``: opening a bundle for a tool, mapping store failures;
- ``patch_flow`` / ``replace`` / ``migration_flow`` / ``temporal_flow``: the tool flows behind
  ``tools.write``.
"""
