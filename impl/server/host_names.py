"""The names a server answers to (``serve --allowed-host`` / ``--allowed-origin``), as a Host or
Origin header carries them; ``host_check`` applies them. No HTTP stack here: the options are
parsed by every ``serve``, stdio included.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
from typing import Callable

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def host_name(value: str) -> str:
    """A name as it stands in a Host header: lower case, an IPv6 address in brackets; a
    ``ValueError`` for anything else (a port, a scheme, a path)."""
    name = value.strip().lower()
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        if ipaddress.ip_address(bare).version == 6:
            return f"[{bare}]"
    except ValueError:
        pass
    if not re.fullmatch(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*", name):
        raise ValueError(f"not a host name or address: {value!r}")
    return name


def origin_name(value: str) -> str:
    """An origin as a browser sends it (``scheme://host[:port]``), lower case."""
    scheme, sep, rest = value.strip().lower().partition("://")
    host, _, port = rest.rpartition(":") if re.search(r":\d{1,5}$", rest) else (rest, "", "")
    if not sep or scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) origin: {value!r}")
    return f"{scheme}://{host_name(host)}" + (f":{port}" if port else "")


def add_host_options(serve: argparse.ArgumentParser) -> None:
    """``serve --allowed-host`` and ``--allowed-origin`` (repeatable)."""
    def checked(convert: Callable[[str], str]) -> Callable[[str], str]:
        def parse(value: str) -> str:
            try:
                return convert(value)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        return parse

    serve.add_argument("--allowed-host", action="append", type=checked(host_name), default=[], metavar="NAME",
                       help="over HTTP, answer only requests whose Host is NAME (any port) or another allowed "
                            "name, against DNS rebinding (repeatable; a loopback bind allows its loopback names; "
                            "another bind without this option takes every Host)")
    serve.add_argument("--allowed-origin", action="append", type=checked(origin_name), default=[],
                       metavar="ORIGIN", help="over HTTP, a browser Origin to answer, e.g. https://kb.example.com "
                                              "(repeatable; default: the http and https origins of the allowed hosts)")
