"""The document-pool fixture: a small source pool (schema v2) generated from the run seed.

The suite writes the pool itself, with the SQLite DDL of the spec (``spec/docpool/sql/
sqlite_schema.sql``, which codegen ships as ``knowspec.generated/docpool/sqlite_schema.sql``), never
with the server's builder: a target is judged against the spec, not against its own code. The
objects below are the expected facts (which topic says which word, which links, aliases and ACL
rows exist); the checks derive every expected answer from them with the seed's rules.

Content is a function of ``(seed, token)``: the seed picks the texts, the token (fresh per run)
names the collections, prefixes every entity key and, as syllables of its digest, begins every
invented word, so runs never collide in one pool: an import keeps the collections of earlier
runs, and a search across collections must find this run's topics only.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sqlite3
import unicodedata
from contextlib import closing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

TOKEN = re.compile(r"^[a-z0-9]{4,16}$")
HERKES = "herkes"
CONFIDENCES = (1.0, 0.875, 0.75, 0.5, 0.25)          # exact in binary: compared as JSON numbers
SOURCES = ("frontmatter", "heuristic", "translation")


# ---- the schema's fold, restated from spec/docpool/pool-schema.md#folding ------------------

_SPECIAL = {"ı": "i", "İ": "i", "ß": "ss", "œ": "oe", "Œ": "oe", "æ": "ae", "Æ": "ae", "ø": "o", "Ø": "o",
            "ł": "l", "Ł": "l", "đ": "d", "Đ": "d", "ð": "d", "Ð": "d", "þ": "th", "Þ": "th"}


def fold(text: str) -> str:
    """Lower case, Turkish and Latin accents stripped: the text FTS rows and queries are made of."""
    out = []
    for ch in text:
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
            continue
        base = "".join(c for c in unicodedata.normalize("NFD", ch) if unicodedata.category(c) != "Mn")
        out.append(base.lower())
    return "".join(out)


def tokens(text: str) -> list[str]:
    """Folded FTS tokens (``unicode61``: runs of letters and digits)."""
    return re.findall(r"[^\W_]+", fold(text))


def ascii_lower(text: str) -> str:
    """ACL principals compare ASCII case-insensitively (``İ`` stays ``İ``)."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def schema_ddl() -> str:
    """The pool schema v2 DDL for SQLite, as the spec ships it."""
    res = resources.files("knowspec.generated") / "docpool" / "sqlite_schema.sql"
    return res.read_text(encoding="utf-8")


# ---- facts -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Chunk:
    ord: int
    heading: str
    body: str


@dataclass(frozen=True)
class Link:
    kind: str
    key: str
    confidence: float
    source: str


@dataclass(frozen=True)
class Topic:
    collection: str
    slug: str
    title: str
    breadcrumb: str
    category: str
    description: str
    source_uri: str
    mtime: str | None
    chunks: tuple[Chunk, ...]
    links: tuple[Link, ...]
    acl: tuple[str, ...]
    word: str                       # appears in this topic only (folded, not even as a prefix)
    mime: str = "text/markdown"

    @property
    def body_md(self) -> str:
        return "\n\n".join(f"## {c.heading.split(' > ')[-1]}\n\n{c.body}" for c in self.chunks)


@dataclass(frozen=True)
class Collection:
    id: str
    title: str
    kind: str
    erisim: str
    generated: str
    help_url_v3: str | None
    meta: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class EntityKind:
    collection: str
    kind: str
    title: str
    key_rule: str
    url_template: str


@dataclass(frozen=True)
class Entity:
    collection: str
    kind: str
    key: str
    title: str
    attrs: dict[str, Any] = field(hash=False, compare=False)


@dataclass(frozen=True)
class Relation:
    collection: str
    from_kind: str
    from_key: str
    rel: str
    to_kind: str
    to_key: str


@dataclass(frozen=True)
class Alias:
    collection: str
    kind: str
    alias: str
    key: str
    confidence: float


@dataclass(frozen=True)
class PoolFixture:
    seed: int
    token: str
    collections: tuple[Collection, ...]
    topics: tuple[Topic, ...]
    kinds: tuple[EntityKind, ...]
    entities: tuple[Entity, ...]
    relations: tuple[Relation, ...]
    aliases: tuple[Alias, ...]
    general_meta: tuple[tuple[str, str], ...]
    vectors: bool = False   # the target's copy holds one vector per topic and chunk (added after writing)

    @property
    def open_id(self) -> str:
        return self.collections[0].id

    @property
    def restricted_id(self) -> str:
        return self.collections[1].id

    def collection(self, cid: str) -> Collection:
        return next(c for c in self.collections if c.id == cid)

    def topics_in(self, cid: str) -> list[Topic]:
        return [t for t in self.topics if t.collection == cid]

    def chunk_count(self, cid: str) -> int:
        return sum(len(t.chunks) for t in self.topics_in(cid))

    def kind_of(self, entity: Entity) -> EntityKind | None:
        return next((k for k in self.kinds if (k.collection, k.kind) == (entity.collection, entity.kind)), None)

    def write(self, path: Path) -> Path:
        """Write the source pool file (replacing any file of that name)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        with closing(sqlite3.connect(path)) as con:
            con.executescript(schema_ddl())
            _insert_all(con, self)
            con.commit()
        return path


def _insert_all(con: sqlite3.Connection, fx: PoolFixture) -> None:
    con.execute("delete from \"doc$meta\" where collection = ''")
    con.executemany('insert into "doc$meta"(collection, name, value) values (\'\', ?, ?)', fx.general_meta)
    for c in fx.collections:
        con.execute('insert into "doc$collection"(id, title, kind, erisim, generated, help_url_v3) '
                    "values (?, ?, ?, ?, ?, ?)", (c.id, c.title, c.kind, c.erisim, c.generated, c.help_url_v3))
        con.executemany('insert into "doc$meta"(collection, name, value) values (?, ?, ?)',
                        [(c.id, n, v) for n, v in c.meta])
    con.executemany('insert into "doc$entity_kind" values (?, ?, ?, ?, ?)',
                    [(k.collection, k.kind, k.title, k.key_rule, k.url_template) for k in fx.kinds])
    con.executemany('insert into "doc$entity"(collection, kind, key, title, attrs) values (?, ?, ?, ?, ?)',
                    [(e.collection, e.kind, e.key, e.title, json.dumps(e.attrs, ensure_ascii=False))
                     for e in fx.entities])
    con.executemany('insert into "doc$entity_rel" values (?, ?, ?, ?, ?, ?)',
                    [(r.collection, r.from_kind, r.from_key, r.rel, r.to_kind, r.to_key) for r in fx.relations])
    con.executemany('insert into "doc$alias" values (?, ?, ?, ?, ?)',
                    [(a.collection, a.kind, a.alias, a.key, a.confidence) for a in fx.aliases])
    for t in fx.topics:
        cur = con.execute(
            'insert into "doc$topic"(collection, slug, title, breadcrumb, category, description, source_uri, '
            "mime, mtime, body_md) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (t.collection, t.slug, t.title, t.breadcrumb, t.category, t.description, t.source_uri, t.mime,
             t.mtime, t.body_md))
        topic_id = cur.lastrowid
        for ch in t.chunks:
            cid = con.execute('insert into "doc$chunk"(topic_id, ord, title, heading, body) values (?, ?, ?, ?, ?)',
                              (topic_id, ch.ord, t.title, ch.heading, ch.body)).lastrowid
            # External-content FTS holds FOLDED text (pool-schema.md#folding).
            con.execute('insert into "doc$chunk_fts"(rowid, title, heading, body) values (?, ?, ?, ?)',
                        (cid, fold(t.title), fold(ch.heading), fold(ch.body)))
        con.executemany('insert into "doc$link" values (?, ?, ?, ?, ?)',
                        [(topic_id, l.kind, l.key, l.confidence, l.source) for l in t.links])
        con.executemany('insert into "doc$acl" values (?, ?)', [(topic_id, p) for p in t.acl])


# ---- generation -----------------------------------------------------------------------------

TR_SUBJECTS = ("Fatura", "İrsaliye", "Sipariş", "Stok kartı", "Çek ve senet", "Kasa", "Banka hesabı", "Müşteri",
               "Tedarikçi", "Ödeme planı", "Tahsilat", "Şube", "Döviz kuru", "Muhasebe fişi", "Üretim emri",
               "Gider pusulası", "Işık ayarı", "Ağırlık birimi")
TR_ACTIONS = ("girişi", "listesi", "iptali", "raporu", "ayarları", "onayı", "aktarımı", "düzeltmesi")
EN_SUBJECTS = ("Invoice", "Delivery note", "Purchase order", "Stock card", "Cash desk", "Bank account", "Customer",
               "Supplier", "Currency rate", "Ledger voucher", "Production order", "Café till")
EN_ACTIONS = ("entry", "list", "cancellation", "report", "settings", "approval", "transfer", "correction")
CATEGORIES = ("Finans", "Lojistik", "Üretim", "İnsan Kaynakları", "Genel Ayarlar")
SENTENCES = (
    "Bu ekranda kayıtlar şube bazında listelenir ve düzeltilebilir.",
    "İşlem onaylandığında muhasebe fişi otomatik oluşturulur.",
    "Döviz kuru güncel değilse sistem uyarı gösterir; ağırlık birimleri dönüştürülür.",
    "Çıktı almadan önce yazıcı ayarlarını kontrol ediniz.",
    "Kullanıcı yetkisi yoksa ilgili düğmeler pasif görünür.",
    "The naïve approach re-enters every line; use the façade report instead.",
    "A résumé of the postings is printed at the end of the day (déjà vu for auditors).",
    "Each rôle sees only the branches it was granted.",
    "Zoë's café till closes the cash desk automatically at midnight.",
    "Ölçü birimi ve fiyat listesi ürün kartından okunur.",
)
SECTIONS_TR = ("Genel bakış", "Alanlar", "Sık sorulan sorular", "İlgili ekranlar")
SECTIONS_EN = ("Overview", "Fields", "Troubleshooting", "Related screens")
SYLLABLES = ("ka", "lı", "şe", "mü", "gö", "çi", "ru", "dı", "ne", "bo", "ğa", "sü", "tı", "fe", "zö", "ya",
             "ıp", "üç", "vo", "ji", "ho", "pe", "ür", "şa")
FORM_WORDS = ("Fatura", "Irsaliye", "Siparis", "Stokkarti", "Cek", "Kasa", "Banka", "Musteri")
FORM_TITLES = ("Fatura formu", "İrsaliye formu", "Sipariş formu", "Stok kartı formu", "Çek formu", "Kasa formu",
               "Banka formu", "Müşteri formu")
MODULES = (("Finans", "Finans modülü"), ("Lojistik", "Lojistik modülü"))
# With the 2 modules and 6 forms, 22 entities: more than doc_entities' default limit of 20, so a
# server that ignores the default and answers every match differs from one that applies it.
OPERATION_CODES = 14


def _slugify(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", fold(text))).strip("-")


TAG_SYLLABLES = 5  # 24**5 tags: two runs' words share a tag about once in eight million


def run_tag(token: str) -> str:
    """The syllables every invented word of the run with ``token`` begins with."""
    n = int.from_bytes(hashlib.sha256(token.encode("ascii")).digest()[:8], "big")
    syllables = []
    for _ in range(TAG_SYLLABLES):
        n, i = divmod(n, len(SYLLABLES))
        syllables.append(SYLLABLES[i])
    return "".join(syllables)


def _words(rng: random.Random, count: int, taken: Iterable[str], tag: str = "") -> list[str]:
    """``count`` invented words, each ``tag`` and a few syllables, whose folded forms are unique
    and prefix-free against ``taken``."""
    out: list[str] = []
    while len(out) < count:
        word = tag + "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 4)))
        folded = fold(word)
        if any(t.startswith(folded) for t in taken):
            continue
        if any(o.startswith(folded) or folded.startswith(o) for o in map(fold, out)):
            continue
        out.append(word.capitalize() if rng.random() < 0.3 else word)
    return out


def _entities(rng: random.Random, cid: str, up: str) -> tuple[list[Entity], list[Relation], list[Alias]]:
    modules = [Entity(cid, "module", f"Mod{up}{key}", title, {"sira": i + 1}) for i, (key, title) in enumerate(MODULES)]
    picked = sorted(rng.sample(range(len(FORM_WORDS)), 6))
    forms = [Entity(cid, "form_class", f"Tfrm{up}{FORM_WORDS[i]}", FORM_TITLES[i],
                    {"modul": rng.choice(modules).key, "mobil": rng.random() < 0.5, "sürüm": f"5.{i}"})
             for i in picked]
    codes = [Entity(cid, "islem_kodu", f"IK{up}{n:03d}", f"{rng.choice(TR_SUBJECTS)} {rng.choice(TR_ACTIONS)}",
                    {"yetki": rng.choice(("okuma", "yazma", "onay"))})
             for n in sorted(rng.sample(range(100, 1000), OPERATION_CODES))]
    relations = {Relation(cid, "form_class", f.key, "part_of", "module", f.attrs["modul"]) for f in forms}
    for code in codes:
        opened = rng.choice(forms)
        relations.add(Relation(cid, "islem_kodu", code.key, "opens", "form_class", opened.key))
        if rng.random() < 0.5:
            mobile = rng.choice([f for f in forms if f is not opened])
            relations.add(Relation(cid, "islem_kodu", code.key, "opens_mobile", "form_class", mobile.key))
    aliases = []
    for form in rng.sample(forms, 3):
        stem = form.key[len(f"Tfrm{up}"):]
        names = (f"TfrmEski{up}{stem}", f"Tfrm{up}{stem}Old")[: rng.randint(1, 2)]
        aliases += [Alias(cid, "form_class", name, form.key, rng.choice(CONFIDENCES[:4])) for name in names]
    return modules + forms + codes, sorted(relations, key=lambda r: (r.from_kind, r.from_key, r.rel, r.to_key)), aliases


def _topic(rng: random.Random, cid: str, index: int, word: str, entities: list[Entity],
           acl: tuple[str, ...]) -> Topic:
    turkish = rng.random() < 0.6
    subject = rng.choice(TR_SUBJECTS if turkish else EN_SUBJECTS)
    action = rng.choice(TR_ACTIONS if turkish else EN_ACTIONS)
    title = f"{subject} {action}"
    category = rng.choice(CATEGORIES)
    slug = f"{'k' if cid.endswith('-acl') else 't'}{index:02d}-{_slugify(title)}"
    sections = SECTIONS_TR if turkish else SECTIONS_EN
    n_chunks = rng.randint(1, 3)
    home = rng.randrange(n_chunks)
    chunks = []
    for i in range(n_chunks):
        body = " ".join(rng.sample(SENTENCES, 2))
        if i == home:
            body += f" Anahtar: {word}." if turkish else f" Keyword: {word}."
        chunks.append(Chunk(i, f"{title} > {sections[i]}", body))
    if rng.random() < 0.3:  # a heading with no text under it: its snippet comes from another column
        chunks.append(Chunk(n_chunks, f"{title} > {sections[n_chunks]}", ""))
    linked = rng.sample(entities, rng.randint(1, 3))
    links = tuple(Link(e.kind, e.key, rng.choice(CONFIDENCES), rng.choice(SOURCES)) for e in linked)
    mtime = None if rng.random() < 0.2 else f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T09:30:00Z"
    return Topic(cid, slug, title, f"{category} > {subject} > {title}", category,
                 f"{title}: {rng.choice(SENTENCES)}", f"docs/{cid}/{slug}.md", mtime, tuple(chunks), links, acl, word)


def restricted_acls(token: str) -> tuple[tuple[str, ...], ...]:
    """The ACL of each restricted topic: open to all, to SYSADMIN in mixed case, to nobody known, to none."""
    role = f"rol-{token}"
    return (("*",), ("*",), ("SysAdmin",), ("sysadmin", role), (role,), (role.upper(), "*"), (),
            (f"kullanici-{token}",))


def generate(seed: int, token: str, general_meta: dict[str, str] | None = None) -> PoolFixture:
    """The fixture for ``seed``; ``general_meta`` is the target's general recipe, kept as it is
    (an import refreshes the general recipe, and the suite must not change the target's)."""
    if not TOKEN.fullmatch(token):
        raise ValueError(f"pool token must match {TOKEN.pattern}")
    rng = random.Random(seed)
    open_id, restricted_id, up = f"conform-{token}", f"conform-{token}-acl", token.upper()
    generated = f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:00:00Z"
    collections = (
        Collection(open_id, "Uygunluk belgeleri (açık)", "docs", HERKES, generated, str(rng.randint(2, 9)),
                   (("search_stopwords", "ve, ile, için, the, and"), ("search_bm25_weights", "3, 7, 1"),
                    ("chunk_fts_snippet_column", "heading"), ("conform_seed", str(seed)))),
        Collection(restricted_id, "Uygunluk belgeleri (kısıtlı)", "docs", "kisitli", generated, None,
                   (("conform_seed", str(seed)),)),
    )
    kinds = (
        EntityKind(open_id, "form_class", "Form sınıfı",
                   "T ile başlayan Delphi sınıf adı; büyük/küçük harf duyarsız",
                   "https://yardim.example/v<v3>/formlar/<key>.htm"),
        EntityKind(open_id, "islem_kodu", "İşlem kodu", "IK + belirteç + üç hane",
                   "https://yardim.example/islem/<key>"),
        EntityKind(open_id, "module", "Modül", "Mod + belirteç + ad", ""),
    )
    entities, relations, aliases = _entities(rng, open_id, up)
    acls = restricted_acls(token)
    n_open = rng.randint(14, 22)
    stopwords = {fold(w) for w in re.split(r"[\s,]+", (general_meta or {}).get("search_stopwords", "")) if w}
    taken = {t for text in (*TR_SUBJECTS, *TR_ACTIONS, *EN_SUBJECTS, *EN_ACTIONS, *CATEGORIES, *SENTENCES,
                            *SECTIONS_TR, *SECTIONS_EN, "Anahtar", "Keyword") for t in tokens(text)}
    words = _words(rng, n_open + len(acls), taken | stopwords, run_tag(token))
    topics = [_topic(rng, open_id, i, words[i], entities, ()) for i in range(n_open)]
    topics += [_topic(rng, restricted_id, i, words[n_open + i], entities, acl) for i, acl in enumerate(acls)]
    general = dict(general_meta or {})
    general.setdefault("schema_version", "2")
    return PoolFixture(seed, token, collections, tuple(topics), kinds, tuple(entities), tuple(relations),
                       tuple(aliases), tuple(sorted(general.items())))
