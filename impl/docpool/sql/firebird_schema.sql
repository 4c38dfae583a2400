-- Pool schema v2 on Firebird 4+: the doc$ tables (no schemas); a line end after two semicolons ends a statement.
-- Same rows as the SQLite pool plus derived columns the importer fills: *_ci = ASCII-lower-cased
-- (SQLite's collate nocase), key_fold / title_fold = rules.fold. VARCHAR sizes keep a row under
-- Firebird's 64 KB limit (longer values fail the import, which rolls back). Long text is BLOB SUB_TYPE TEXT,
-- vectors BLOB SUB_TYPE BINARY. There is no full-text index of Firebird's own: every import builds
-- the search layer's index (rules.fts5) and persists it in doc$fts_snapshot with the stamp it made
-- (fulltext/reader.py dump); storage/firebird.py loads it while doc$pool_state.stamp still says so,
-- else builds it in memory.
-- The default UTF8 collation orders by code point, as SQLite compares text.

create table doc$collection (
    id          varchar(255) not null primary key,
    title       varchar(2000) default '' not null,
    kind        varchar(255) default 'docs' not null,
    erisim      varchar(255) default 'herkes' not null,
    generated   varchar(255),
    help_url_v3 varchar(255)
);;
create table doc$topic (
    id          bigint not null primary key,
    collection  varchar(255) not null,
    slug        varchar(1000) not null,
    title       varchar(2000) default '' not null,
    breadcrumb  varchar(2000) default '' not null,
    category    varchar(1000) default '' not null,
    description varchar(4000) default '' not null,
    source_uri  varchar(2000) default '' not null,
    mime        varchar(255) default 'text/markdown' not null,
    mtime       varchar(255),
    body_md     blob sub_type text default '' not null
);;
create index doc$topic_collection on doc$topic(collection);;
-- doc_get finds a topic by slug: a key of the whole slug (4000 bytes in UTF8) is too long for an
-- index, so its first 200 characters are indexed (storage/firebird.py SLUG_KEY, same expression).
create index doc$topic_slug on doc$topic computed by (cast(left(slug, 200) as varchar(200)));;
create table doc$chunk (
    id       bigint not null primary key,
    topic_id bigint not null,
    ord      integer default 0 not null,
    title    blob sub_type text default '' not null,
    heading  blob sub_type text default '' not null,
    body     blob sub_type text default '' not null
);;
create index doc$chunk_topic on doc$chunk(topic_id);;
create table doc$entity_kind (
    collection   varchar(255) not null,
    kind         varchar(255) not null,
    title        varchar(2000) default '' not null,
    key_rule     varchar(2000) default '' not null,
    url_template varchar(2000) default '' not null
);;
create table doc$entity (
    id         bigint not null primary key,
    collection varchar(255) not null,
    kind       varchar(255) not null,
    "key"      varchar(1000) not null,
    key_ci     varchar(1000) not null,
    key_fold   varchar(2000) not null,
    title      varchar(2000) default '' not null,
    title_fold varchar(2000) default '' not null,
    attrs      blob sub_type text default '{}' not null
);;
create table doc$entity_rel (
    collection  varchar(255) not null,
    from_kind   varchar(255) not null,
    from_key    varchar(1000) not null,
    from_key_ci varchar(1000) not null,
    rel         varchar(255) not null,
    to_kind     varchar(255) not null,
    to_key      varchar(1000) not null,
    to_key_ci   varchar(1000) not null
);;
create table doc$alias (
    collection varchar(255) not null,
    kind       varchar(255) not null,
    alias      varchar(1000) not null,
    alias_ci   varchar(1000) not null,
    "key"      varchar(1000) not null,
    key_ci     varchar(1000) not null,
    confidence double precision default 1.0 not null
);;
create table doc$link (
    topic_id   bigint not null,
    kind       varchar(255) not null,
    "key"      varchar(1000) not null,
    key_ci     varchar(1000) not null,
    confidence double precision default 1.0 not null,
    source     varchar(255) default '' not null
);;
create index doc$link_topic on doc$link(topic_id);;
create table doc$acl (
    topic_id     bigint not null,
    principal    varchar(1000) not null,
    principal_ci varchar(1000) not null
);;
create index doc$acl_topic on doc$acl(topic_id);;
create table doc$meta (
    collection varchar(255) default '' not null,
    name       varchar(255) not null,
    "value"    blob sub_type text default '' not null
);;
create table doc$topic_vec (
    topic_id bigint not null primary key,
    vec      blob sub_type binary not null
);;
create table doc$chunk_vec (
    chunk_id bigint not null primary key,
    vec      blob sub_type binary not null
);;
create table doc$fts_snapshot (
    part     integer not null primary key,
    revision varchar(255) not null,
    data     blob sub_type binary not null
);;
create table doc$pool_state (
    id    integer not null primary key,
    stamp bigint default 0 not null
);;
insert into doc$pool_state(id, stamp) values (1, 0)
