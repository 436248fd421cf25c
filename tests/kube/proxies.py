"""Two tiny real proxies for tests of a kubeconfig's proxy-url: an HTTP CONNECT proxy and a
SOCKS5 proxy (RFC 1928, no authentication or username/password, CONNECT only), each on its
own asyncio loop in a daemon thread on 127.0.0.1.

Each counts the tunnels it opened (`tunnels`: the target host and port each client asked
for) and may send a target elsewhere (`route`), so a test can name a server only the proxy
knows the way to: a client that bypasses the proxy cannot reach it at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any


class _Proxy:
    """The loop, the listening socket and the relay; subclasses read the handshake."""

    def __init__(self, route: dict[tuple[str, int], tuple[str, int]] | None = None) -> None:
        self.route = dict(route or {})
        self.tunnels: list[tuple[str, int]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=type(self).__name__, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    @property
    def port(self) -> int:
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            me = asyncio.current_task()
            for task in asyncio.all_tasks():
                if task is not me:
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[str, int] | None:
        raise NotImplementedError

    async def _answer(self, writer: asyncio.StreamWriter, ok: bool) -> None:
        raise NotImplementedError

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            target = await self._handshake(reader, writer)
            if target is None:
                return
            self.tunnels.append(target)
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    *self.route.get(target, target)
                )
            except OSError:
                await self._answer(writer, ok=False)
                return
            await self._answer(writer, ok=True)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


class ConnectProxy(_Proxy):
    """`CONNECT host:port HTTP/1.1`, headers, `200 Connection established`, then bytes."""

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[str, int] | None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, authority, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return None
        host, _, port = authority.rpartition(":")
        return host.strip("[]"), int(port)

    async def _answer(self, writer: asyncio.StreamWriter, ok: bool) -> None:
        writer.write(
            b"HTTP/1.1 200 Connection established\r\n\r\n"
            if ok
            else b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"
        )
        await writer.drain()


class Socks5Proxy(_Proxy):
    """RFC 1928 CONNECT, with an IPv4, IPv6 or domain-name address. With `credentials`,
    RFC 1929 username/password is required."""

    def __init__(self, *args: Any, credentials: tuple[str, str] | None = None, **kw: Any) -> None:
        self.credentials = credentials
        super().__init__(*args, **kw)

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[str, int] | None:
        version, count = await reader.readexactly(2)
        methods = await reader.readexactly(count)
        wanted = 0x02 if self.credentials else 0x00
        if version != 5 or wanted not in methods:
            writer.write(b"\x05\xff")
            return None
        writer.write(bytes([5, wanted]))
        if self.credentials:
            _, ulen = await reader.readexactly(2)
            user = (await reader.readexactly(ulen)).decode()
            (plen,) = await reader.readexactly(1)
            password = (await reader.readexactly(plen)).decode()
            good = (user, password) == self.credentials
            writer.write(b"\x01\x00" if good else b"\x01\x01")
            if not good:
                return None
        _, command, _, kind = await reader.readexactly(4)
        if kind == 1:
            host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
        elif kind == 4:
            host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
        else:
            (length,) = await reader.readexactly(1)
            host = (await reader.readexactly(length)).decode()
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        if command != 1:  # only CONNECT
            writer.write(b"\x05\x07\x00\x01" + bytes(6))
            return None
        return host, port

    async def _answer(self, writer: asyncio.StreamWriter, ok: bool) -> None:
        writer.write((b"\x05\x00" if ok else b"\x05\x05") + b"\x00\x01" + bytes(6))
        await writer.drain()


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@contextlib.contextmanager
def running(proxy: _Proxy) -> Iterator[_Proxy]:
    try:
        yield proxy
    finally:
        proxy.close()
