"""The sockets ``serve --http`` listens on, and the connections handed to its workers: Nagle off.

asyncio sets ``TCP_NODELAY`` only on sockets whose protocol says TCP; a listener made with
protocol 0 passes that on to every accepted connection, and each answer (headers, then body)
then waited ~40 ms for the client's delayed ACK."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from knowspec.impl.server.connection_handoff import HandoffReceiver, hand_off, handoff_sender
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


def test_a_connection_accepted_on_the_servers_socket_has_nagle_off():
    sock = bound_socket("127.0.0.1", 0)
    assert asyncio.run(_accepted_nodelay(sock)) != 0


async def _handed_nodelay(tmp_path: Path) -> int:
    loop = asyncio.get_running_loop()
    seen: asyncio.Future[int] = loop.create_future()

    class Recording(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
            seen.set_result(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    receiver = HandoffReceiver(tmp_path / "w.handoff", Recording)
    receiver.start()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # protocol 0: the handed copy must still say TCP
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        with handoff_sender() as sender:
            hand_off(sender, tmp_path / "w.handoff", accepted)
        accepted.close()
        value = await asyncio.wait_for(seen, 10)
        client.close()
    finally:
        receiver.stop()
        listener.close()
    return value


def test_a_connection_handed_to_a_worker_has_nagle_off(tmp_path):
    assert asyncio.run(_handed_nodelay(tmp_path)) != 0
