"""The sockets ``serve --http`` listens on: connections accepted on them have Nagle off.

asyncio sets ``TCP_NODELAY`` only on sockets whose protocol says TCP; a listener made with
protocol 0 passes that on to every accepted connection, and each answer (headers, then body)
then waited ~40 ms for the client's delayed ACK."""

from __future__ import annotations

import asyncio
import socket

import pytest

from knowspec.impl.server.workers import bound_socket


async def _accepted_nodelay(sock: socket.socket) -> int:
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=sock)
    async with server:
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        value = await asyncio.wait_for(seen, 10)
        writer.close()
    return value


@pytest.mark.parametrize("reuse_port", [False, True], ids=["single", "workers"])
def test_a_connection_accepted_on_the_servers_socket_has_nagle_off(reuse_port):
    sock = bound_socket("127.0.0.1", 0, reuse_port=reuse_port)
    assert asyncio.run(_accepted_nodelay(sock)) != 0
