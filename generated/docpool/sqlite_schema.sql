-- Pool schema v2 (SQLite storage): the doc$ tables shared by the help pool and document pools.
-- See spec/docpool/pool-schema.md for the meaning of every column. Idempotent: safe to run on
-- an existing pool. Text stored in doc$chunk_fts is FOLDED (knowspec.impl.rules.fold, exposed to
-- SQL as the function doc_fold); snippets read the original text from doc$chunk.

create table if not exists "doc$collection" (
    id          text primary key,                 -- ^[a-z0-9][a-z0-9-]*$
    title       text not null default '',
    kind        text not null default 'docs',     -- help | docs | okf | ...
    erisim      text not null default 'herkes',   -- 'herkes' = everyone; anything else = ACL only
    generated   text,                             -- when the source pool was built (ISO 8601)
    help_url_v3 text                              -- <v3> of help URLs; NULL = agent version
);

create table if not exists "doc$topic" (
    id          integer primary key,
    collection  text not null references "doc$collection"(id),
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

create table if not exists "doc$chunk" (
    id       integer primary key,
    topic_id integer not null references "doc$topic"(id),
    ord      integer not null default 0,           -- position of the section in the topic
    title    text not null default '',             -- topic title (repeated: weighted column)
    heading  text not null default '',             -- section heading path
    body     text not null default ''              -- section text (Markdown)
);
create unique index if not exists "doc$chunk_topic" on "doc$chunk"(topic_id, ord);

-- External content: the index holds doc_fold(title/heading/body); snippet() reads doc$chunk.
-- Never run the 'rebuild' command on it (it would index unfolded text): use doc_import.sql.
create virtual table if not exists "doc$chunk_fts" using fts5(
    title, heading, body,
    content = 'doc$chunk', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

create table if not exists "doc$entity_kind" (
    collection   text not null,
    kind         text not null,                    -- module | form_class | islem_kodu | ...
    title        text not null default '',
    key_rule     text not null default '',         -- how keys of this kind are written
    url_template text not null default '',         -- help URL with <key> and <v3>
    primary key (collection, kind)
);

create table if not exists "doc$entity" (
    id         integer primary key,
    collection text not null,
    kind       text not null,
    key        text not null collate nocase,
    title      text not null default '',
    attrs      text not null default '{}',         -- JSON object, open attribute map
    unique (collection, kind, key)
);

create table if not exists "doc$entity_rel" (
    collection text not null,
    from_kind  text not null,
    from_key   text not null collate nocase,
    rel        text not null,                      -- opens | opens_mobile | part_of | ...
    to_kind    text not null,
    to_key     text not null collate nocase,
    primary key (collection, from_kind, from_key, rel, to_kind, to_key)
);

create table if not exists "doc$alias" (
    collection text not null,
    kind       text not null,
    alias      text not null collate nocase,       -- an old name
    key        text not null collate nocase,       -- the current key
    confidence real not null default 1.0,
    primary key (collection, kind, alias, key)
);

create table if not exists "doc$link" (
    topic_id   integer not null references "doc$topic"(id),
    kind       text not null,
    key        text not null collate nocase,
    confidence real not null default 1.0,          -- 0..1, larger = more reliable
    source     text not null default '',           -- frontmatter | heuristic | manual | ...
    primary key (topic_id, kind, key)
);
create index if not exists "doc$link_entity" on "doc$link"(kind, key);

create table if not exists "doc$acl" (
    topic_id  integer not null references "doc$topic"(id),
    principal text not null,                       -- user, role or '*' (ASCII case-insensitive)
    primary key (topic_id, principal)
);

create table if not exists "doc$meta" (
    collection text not null default '',           -- '' = the general recipe
    name       text not null,   -- search_bm25_weights | chunk_fts_snippet_column | search_stopwords | vec_query_prefix | schema_version | ...
    value      text not null default '',
    primary key (collection, name)
);

create table if not exists "doc$topic_vec" (
    topic_id integer primary key references "doc$topic"(id),
    vec      blob not null                         -- little-endian float32, L2-normalised
);

create table if not exists "doc$chunk_vec" (
    chunk_id integer primary key references "doc$chunk"(id),
    vec      blob not null
);

-- The full-text index as the search layer ranks it (knowspec.impl.docpool.fulltext.reader.dump),
-- written by every import in its own transaction, cut into parts (part 0 first). revision is the
-- pool's content revision when it was written (reader.sqlite_revision): a reader uses it only
-- while the pool still has that revision, else it reads the FTS5 index itself.
create table if not exists "doc$fts_snapshot" (
    part     integer primary key,
    revision text not null,
    data     blob not null
);

insert or ignore into "doc$meta"(collection, name, value) values
    ('', 'schema_version', '2'),
    ('', 'search_bm25_weights', '10.0, 5.0, 1.0'),
    ('', 'chunk_fts_snippet_column', 'body'),
    ('', 'search_stopwords', ''),
    ('', 'vec_query_prefix', 'query: ');
