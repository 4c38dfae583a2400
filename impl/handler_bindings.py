"""Every tool's handler bound to its generated protocol (``generated/handlers.py``).

The registry names handlers by dotted string, so nothing else ties a handler's signature to the
spec: mypy checks each assignment below (``args`` must accept exactly the generated input
model), and ``tests/test_handler_signatures.py`` checks that this table is the registry's.
"""

from __future__ import annotations

from knowspec.generated import handlers as protocols
from knowspec.impl.docpool import tools as docpool
from knowspec.impl.okf.tools import query as query_tools
from knowspec.impl.okf.tools import read as read_tools
from knowspec.impl.okf.tools import write as write_tools

list_concepts: protocols.ListConceptsHandler = read_tools.list_concepts
search_sections: protocols.SearchSectionsHandler = query_tools.search_sections
search_concepts: protocols.SearchConceptsHandler = query_tools.search_concepts
read_concept: protocols.ReadConceptHandler = read_tools.read_concept
get_neighbors: protocols.GetNeighborsHandler = query_tools.get_neighbors
validate_bundle: protocols.ValidateBundleHandler = read_tools.validate_bundle
get_semantic_graph: protocols.GetSemanticGraphHandler = query_tools.get_semantic_graph
write_concept: protocols.WriteConceptHandler = write_tools.write_concept
preview_concept_patch: protocols.PreviewConceptPatchHandler = write_tools.preview_concept_patch
apply_concept_patch: protocols.ApplyConceptPatchHandler = write_tools.apply_concept_patch
preview_v02_migration: protocols.PreviewV02MigrationHandler = write_tools.preview_v02_migration
apply_v02_migration: protocols.ApplyV02MigrationHandler = write_tools.apply_v02_migration
preview_temporal_upgrade: protocols.PreviewTemporalUpgradeHandler = write_tools.preview_temporal_upgrade
apply_temporal_upgrade: protocols.ApplyTemporalUpgradeHandler = write_tools.apply_temporal_upgrade
doc_collections: protocols.DocCollectionsHandler = docpool.doc_collections
doc_search: protocols.DocSearchHandler = docpool.doc_search
doc_get: protocols.DocGetHandler = docpool.doc_get
doc_entity: protocols.DocEntityHandler = docpool.doc_entity
doc_entities: protocols.DocEntitiesHandler = docpool.doc_entities
doc_links: protocols.DocLinksHandler = docpool.doc_links
help_search: protocols.HelpSearchHandler = docpool.help_search
help_get_topic: protocols.HelpGetTopicHandler = docpool.help_get_topic
help_form_info: protocols.HelpFormInfoHandler = docpool.help_form_info
help_stats: protocols.HelpStatsHandler = docpool.help_stats
doc_stats: protocols.DocStatsHandler = docpool.doc_stats
