-- Pool schema v2 on PostgreSQL: the doc$ tables in schema ivd$docs (outside any catalog).
-- Same rows as the SQLite pool (spec/docpool/pool-schema.md) plus derived columns the importer
-- fills: *_ci = ASCII-lower-cased (SQLite's collate nocase), key_fold / title_fold = rules.fold.
-- Full text is ranked by the search layer from doc$fts_snapshot (no tsvector, no GIN index); the
-- function doc$fold (generated from knowspec.impl.rules.fold, installed before this script)
-- folds entity lookups. Idempotent. The connection's search_path is ivd$docs.

create table if not exists doc$collection (
    id          text primary key,
    title       text not null default '',
    kind        text not null default 'docs',
    erisim      text not null default 'herkes',
    generated   text,
    help_url_v3 text
);

create table if not exists doc$topic (
    id          bigint primary key,
    collection  text not null references doc$collection(id),
    slug        text not null,
    title       text not null default '',
    breadcrumb  text not null default '',
    category    text not null default '',
    description text not null default '',
    source_uri  text not null default '',
    mime        text not null default 'text/markdown',
    mtime       text,
    body_md     text not null default '',
    unique (collection, slug)
);

create table if not exists doc$chunk (
    id       bigint primary key,
    topic_id bigint not null references doc$topic(id),
    ord      integer not null default 0,
    title    text not null default '',
    heading  text not null default '',
    body     text not null default ''
);
create unique index if not exists doc$chunk_topic on doc$chunk(topic_id, ord);

create table if not exists doc$entity_kind (
    collection   text not null,
    kind         text not null,
    title        text not null default '',
    key_rule     text not null default '',
    url_template text not null default '',
    primary key (collection, kind)
);

create table if not exists doc$entity (
    id         bigint primary key,
    collection text not null,
    kind       text not null,
    key        text not null,
    key_ci     text not null,
    key_fold   text not null,
    title      text not null default '',
    title_fold text not null default '',
    attrs      text not null default '{}',
    unique (collection, kind, key_ci)
);
create index if not exists doc$entity_key on doc$entity(kind, key_ci);

create table if not exists doc$entity_rel (
    collection  text not null,
    from_kind   text not null,
    from_key    text not null,
    from_key_ci text not null,
    rel         text not null,
    to_kind     text not null,
    to_key      text not null,
    to_key_ci   text not null,
    primary key (collection, from_kind, from_key_ci, rel, to_kind, to_key_ci)
);
create index if not exists doc$entity_rel_to on doc$entity_rel(to_kind, to_key_ci);

create table if not exists doc$alias (
    collection text not null,
    kind       text not null,
    alias      text not null,
    alias_ci   text not null,
    key        text not null,
    key_ci     text not null,
    confidence double precision not null default 1.0,
    primary key (collection, kind, alias_ci, key_ci)
);

create table if not exists doc$link (
    topic_id   bigint not null references doc$topic(id),
    kind       text not null,
    key        text not null,
    key_ci     text not null,
    confidence double precision not null default 1.0,
    source     text not null default '',
    primary key (topic_id, kind, key_ci)
);
create index if not exists doc$link_entity on doc$link(kind, key_ci);

create table if not exists doc$acl (
    topic_id     bigint not null references doc$topic(id),
    principal    text not null,
    principal_ci text not null,
    primary key (topic_id, principal)
);

create table if not exists doc$meta (
    collection text not null default '',
    name       text not null,
    "value"    text not null default '',
    primary key (collection, name)
);

create table if not exists doc$topic_vec (
    topic_id bigint primary key references doc$topic(id),
    vec      bytea not null
);

create table if not exists doc$chunk_vec (
    chunk_id bigint primary key references doc$chunk(id),
    vec      bytea not null
);

-- The search layer's full-text index of the whole pool, made by every import in its transaction
-- and tagged with the import counter it made (fulltext.reader.dump, cut into parts).
create table if not exists doc$fts_snapshot (
    part     integer primary key,
    revision text not null,
    data     bytea not null
);

-- One row: bumped by every import; the in-process caches (vectors) key on it.
create table if not exists doc$pool_state (
    id    integer primary key,
    stamp bigint not null default 0
);
insert into doc$pool_state(id, stamp) values (1, 0) on conflict (id) do nothing;
