"""A tiny REST app with the IMPORTDOC path (good, or broken by ``variant``), for the REST check."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

TOKEN = "t0ken"


def envelope(code: str, message: str, status: int) -> JSONResponse:
    return JSONResponse({"code": code, "message": message, "retryable": False, "diagnostics": []}, status)


def build(variant: str = "good") -> Starlette:
    async def login(request: Request):
        body = await request.json()
        if body.get("user") == "admin" and body.get("password") == "secret":
            return JSONResponse({"token": TOKEN, "user": "admin", "roles": ["SYSADMIN"], "database": "",
                                 "expiresIn": 3600})
        return envelope("unauthorized", "bad credentials", 401)

    async def execcommand(request: Request):
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            if variant == "plain_401":
                return PlainTextResponse("Unauthorized", 401)
            return envelope("unauthorized", "a SYSADMIN session is required", 401)
        body = await request.json()
        params = body.get("params") or {}
        if not {"database", "collection", "path"} <= set(params):
            return envelope("invalid_request", "IMPORTDOC needs database, collection and path", 400)
        message = "invalid collection name"
        if variant == "leak_path":
            message += f" (source {params['path']})"
        return JSONResponse({"result": False, "message": message}, 202)

    return Starlette(routes=[Route("/ClientREST/Login", login, methods=["POST"]),
                             Route("/AdminREST/EXECCOMMAND", execcommand, methods=["POST"])])
