-- doc_import.sql: the IMPORTDOC recipe for a SQLite document pool (pool schema v2).
--
-- Parameters and how to run it (knowspec.impl.docpool.recipe.import_collection does exactly this):
--   target      the document pool file, opened read-write (WAL) with the schema ensured
--               (storage.sqlite.open_for_write) and the SQL function doc_fold registered;
--   source      the source pool, attached READ-ONLY under the name src:
--                 attach database 'file:<source>?mode=ro' as src   (URI filenames enabled)
--   :collection the collection to import, ^[a-z0-9][a-z0-9-]*$ (validated by the caller).
-- Before the transaction, the caller checks   select count(*) from src."doc$collection" where id = :collection
-- and answers 202 {result: false} when it is 0 (target untouched).
-- Then every statement below runs in order, with the named parameter :collection, inside ONE
-- transaction (begin immediate ... commit; rollback on any error, so nothing changes).
-- Statements are separated by a line holding only ";;". After commit: detach database src.
-- Topic and chunk ids are re-numbered in the target; rows are matched by (collection, slug)
-- and (topic, ord).

-- 1. Delete the collection's rows (children first).
delete from "doc$acl" where topic_id in (select id from "doc$topic" where collection = :collection)
;;
delete from "doc$link" where topic_id in (select id from "doc$topic" where collection = :collection)
;;
delete from "doc$topic_vec" where topic_id in (select id from "doc$topic" where collection = :collection)
;;
delete from "doc$chunk_vec" where chunk_id in (select ch.id from "doc$chunk" ch
    join "doc$topic" t on t.id = ch.topic_id where t.collection = :collection)
;;
delete from "doc$chunk" where topic_id in (select id from "doc$topic" where collection = :collection)
;;
delete from "doc$topic" where collection = :collection
;;
delete from "doc$entity_rel" where collection = :collection
;;
delete from "doc$alias" where collection = :collection
;;
delete from "doc$entity" where collection = :collection
;;
delete from "doc$entity_kind" where collection = :collection
;;
-- The general model identity (vec_model, vec_dim) stays when the source brings none, so the
-- vectors of the other collections keep their recorded model.
delete from "doc$meta" where collection = :collection
    or (collection = '' and not (name in ('vec_model', 'vec_dim')
        and not exists (select 1 from src."doc$meta" where collection = '' and name in ('vec_model', 'vec_dim'))))
;;
delete from "doc$collection" where id = :collection
;;
-- 2. Copy the collection from the source.
insert into "doc$collection"(id, title, kind, erisim, generated, help_url_v3)
select id, title, kind, erisim, generated, help_url_v3 from src."doc$collection" where id = :collection
;;
insert into "doc$topic"(collection, slug, title, breadcrumb, category, description, source_uri, mime, mtime, body_md)
select collection, slug, title, breadcrumb, category, description, source_uri, mime, mtime, body_md
from src."doc$topic" where collection = :collection order by id
;;
insert into "doc$chunk"(topic_id, ord, title, heading, body)
select tt.id, sc.ord, sc.title, sc.heading, sc.body
from src."doc$chunk" sc join src."doc$topic" st on st.id = sc.topic_id
join main."doc$topic" tt on tt.collection = st.collection and tt.slug = st.slug
where st.collection = :collection order by sc.id
;;
insert into "doc$link"(topic_id, kind, key, confidence, source)
select tt.id, sl.kind, sl.key, sl.confidence, sl.source
from src."doc$link" sl join src."doc$topic" st on st.id = sl.topic_id
join main."doc$topic" tt on tt.collection = st.collection and tt.slug = st.slug
where st.collection = :collection
;;
insert into "doc$acl"(topic_id, principal)
select tt.id, sa.principal
from src."doc$acl" sa join src."doc$topic" st on st.id = sa.topic_id
join main."doc$topic" tt on tt.collection = st.collection and tt.slug = st.slug
where st.collection = :collection
;;
insert into "doc$topic_vec"(topic_id, vec)
select tt.id, sv.vec
from src."doc$topic_vec" sv join src."doc$topic" st on st.id = sv.topic_id
join main."doc$topic" tt on tt.collection = st.collection and tt.slug = st.slug
where st.collection = :collection
;;
insert into "doc$chunk_vec"(chunk_id, vec)
select tc.id, sv.vec
from src."doc$chunk_vec" sv join src."doc$chunk" sc on sc.id = sv.chunk_id
join src."doc$topic" st on st.id = sc.topic_id
join main."doc$topic" tt on tt.collection = st.collection and tt.slug = st.slug
join main."doc$chunk" tc on tc.topic_id = tt.id and tc.ord = sc.ord
where st.collection = :collection
;;
insert into "doc$entity"(collection, kind, key, title, attrs)
select collection, kind, key, title, attrs from src."doc$entity" where collection = :collection
;;
insert into "doc$entity_rel"(collection, from_kind, from_key, rel, to_kind, to_key)
select collection, from_kind, from_key, rel, to_kind, to_key from src."doc$entity_rel" where collection = :collection
;;
insert into "doc$alias"(collection, kind, alias, key, confidence)
select collection, kind, alias, key, confidence from src."doc$alias" where collection = :collection
;;
-- 3. Refresh the entity kinds and the recipes (general rows collection = '' and the collection's own).
insert into "doc$entity_kind"(collection, kind, title, key_rule, url_template)
select collection, kind, title, key_rule, url_template from src."doc$entity_kind" where collection = :collection
;;
insert into "doc$meta"(collection, name, value)
select collection, name, value from src."doc$meta" where collection in ('', :collection)
;;
insert or ignore into "doc$meta"(collection, name, value) values ('', 'schema_version', '2')
;;
-- 4. Rebuild the full-text index over folded text (never the FTS5 'rebuild' command).
insert into "doc$chunk_fts"("doc$chunk_fts") values ('delete-all')
;;
insert into "doc$chunk_fts"(rowid, title, heading, body)
select id, doc_fold(title), doc_fold(heading), doc_fold(body) from "doc$chunk"
