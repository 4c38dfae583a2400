"""The toy target's contract: two OKF-like tools with small limits (limit max 10, query 64)."""

from __future__ import annotations

import copy
import json

ENVELOPE = {
    "type": "object", "additionalProperties": False,
    "required": ["code", "message", "retryable", "diagnostics"],
    "properties": {
        "code": {"type": "string", "minLength": 1, "pattern": "^[a-z0-9_]+$"},
        "message": {"type": "string", "minLength": 1},
        "retryable": {"type": "boolean"},
        "diagnostics": {"type": "array", "maxItems": 10000, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["code", "severity", "file", "field", "message", "spec_ref", "policy_failure"],
            "properties": {"code": {"type": "string", "minLength": 1},
                           "severity": {"enum": ["ERROR", "WARN", "INFO"]},
                           "file": {"type": "string"}, "field": {"type": "string"},
                           "message": {"type": "string"}, "spec_ref": {"type": "string"},
                           "policy_failure": {"type": "boolean"}}}},
    },
}
CARD = {"type": "object", "additionalProperties": False, "required": ["id", "path", "title", "description", "tags"],
        "properties": {"id": {"type": "string"}, "path": {"type": "string"}, "title": {"type": "string"},
                       "description": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}}
BUNDLE_PATH = {"type": "string", "minLength": 1, "maxLength": 4096}
LIMIT = {"type": "integer", "minimum": 1, "maximum": 10, "default": 5}

# $id and a local $ref on purpose: the suite must generate from self-contained 2020-12 schemas
SEARCH_IN = {"$schema": "https://json-schema.org/draft/2020-12/schema",
             "$id": "https://toy.invalid/search_concepts.input.schema.json",
             "type": "object", "additionalProperties": False, "required": ["bundle_path", "query"],
             "properties": {"bundle_path": BUNDLE_PATH,
                            "query": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "\\S"},
                            "limit": {"$ref": "#/$defs/Limit", "default": 5}},
             "$defs": {"Limit": {"type": "integer", "minimum": 1, "maximum": 10}}}
SEARCH_OUT = {"type": "object", "additionalProperties": False, "required": ["query", "total", "truncated", "hits"],
              "properties": {"query": {"type": "string"}, "total": {"type": "integer", "minimum": 0},
                             "truncated": {"type": "boolean"},
                             "hits": {"type": "array", "maxItems": 10, "items": {
                                 "type": "object", "additionalProperties": False, "required": ["concept", "match"],
                                 "properties": {"concept": CARD, "match": {
                                     "enum": ["id", "title", "description", "tags", "body"]}}}}}}
KIND = {"type": "string", "enum": ["navigation", "relation", "source"]}
NEIGHBORS_IN = {"type": "object", "additionalProperties": False, "required": ["bundle_path", "concept_id"],
                "properties": {"bundle_path": BUNDLE_PATH,
                               "concept_id": {"type": "string", "minLength": 1, "maxLength": 4096},
                               "direction": {"type": "string", "enum": ["in", "out", "both"], "default": "both"},
                               "kinds": {"type": "array", "minItems": 1, "maxItems": 3, "uniqueItems": True,
                                         "items": KIND},
                               "limit": LIMIT}}
EDGE = {"type": "object", "additionalProperties": False,
        "required": ["from", "to", "kind", "relation_type"],
        "properties": {"from": {"type": "string"}, "to": {"type": "string"},
                       "kind": {"enum": ["navigation", "relation"]},
                       "relation_type": {"type": ["string", "null"]}}}
SOURCE = {"type": "object", "additionalProperties": False, "required": ["id", "resource", "title"],
          "properties": {"id": {"type": "string"}, "resource": {"type": "string"}, "title": {"type": "string"}}}
NEIGHBORS_OUT = {"type": "object", "additionalProperties": False,
                 "required": ["concept", "direction", "kinds", "total", "truncated", "edges", "sources"],
                 "properties": {"concept": CARD, "direction": {"type": "string"},
                                "kinds": {"type": "array", "items": KIND},
                                "total": {"type": "integer", "minimum": 0}, "truncated": {"type": "boolean"},
                                "edges": {"type": "array", "maxItems": 10, "items": EDGE},
                                "sources": {"type": "array", "maxItems": 100, "items": SOURCE}}}

TOOLS = {
    "search_concepts": {"input": SEARCH_IN, "success": SEARCH_OUT,
                        "errors": ["schema_validation", "resource_limit", "invalid_request", "operation_rejected"],
                        "limits": {"limit": {"default": 5, "minimum": 1, "maximum": 10}, "query": {"maxLength": 64}},
                        "ordering": {"hits": "priority then id"}},
    "get_neighbors": {"input": NEIGHBORS_IN, "success": NEIGHBORS_OUT,
                      "errors": ["schema_validation", "resource_limit", "invalid_request", "operation_rejected",
                                 "concept_not_found"],
                      "limits": {"limit": {"default": 5, "minimum": 1, "maximum": 10}, "kinds": {"maxItems": 3}},
                      "ordering": {"edges": "kind, from, to, type"}},
}
ERROR_CODES = {
    "schema_validation": {"retryable": False, "families": ["okf"]},
    "resource_limit": {"retryable": False, "families": ["okf"]},
    "invalid_request": {"retryable": False, "families": ["okf"]},
    "operation_rejected": {"retryable": False, "families": ["okf"]},
    "concept_not_found": {"retryable": False, "families": ["okf"]},
    "operation_cancelled": {"retryable": True, "families": ["okf"]},
}


def output_schema(name: str) -> dict:
    return {"type": "object", "anyOf": [copy.deepcopy(TOOLS[name]["success"]), copy.deepcopy(ENVELOPE)]}


def contract() -> dict:
    """The toy contract in the ``generated/contract.json`` format."""
    # contract-revision 1: the toy states every rule of the revision its checks were written for
    return {"knowspec_contract": 1, "revision": {"toy": True, "contract-revision": 1}, "error_codes": ERROR_CODES,
            "error_schema": ENVELOPE,
            "tools": [{"name": name, "family": "okf", "title": name, "description": name,
                       "read_only": True, "idempotent": True, "input_schema": t["input"],
                       "output_schema": output_schema(name), "success_schema": t["success"],
                       "text_fallback": "json", "text_encoder": "go", "wrap": "", "errors": t["errors"], "limits": t["limits"],
                       "ordering": t["ordering"]} for name, t in TOOLS.items()]}


if __name__ == "__main__":
    print(json.dumps(contract(), indent=1))
