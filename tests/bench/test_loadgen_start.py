"""`run_load` (bench/loadgen.py) with `start`: successive phases send texts the server has not seen yet (the
realistic mix's figures must not come from per-text caches warmed by the phase before)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from loadgen import build_request, run_load


async def _phases() -> tuple[list[bytes], list[bytes]]:
    seen: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
            if not head:
                break
            length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
            seen.append(await reader.readexactly(length))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    bodies = [f"text {i}".encode() for i in range(40)]
    payloads = [build_request("127.0.0.1", port, "/", b) for b in bodies]
    first = await run_load("127.0.0.1", port, payloads, concurrency=4, total=12)
    phase_one = list(seen)
    await run_load("127.0.0.1", port, payloads, concurrency=4, total=12, start=first.count)
    server.close()
    await server.wait_closed()
    return phase_one, seen[len(phase_one) :]


def test_a_phase_started_where_the_last_stopped_sends_no_text_again() -> None:
    phase_one, phase_two = asyncio.run(_phases())
    assert sorted(phase_one) == sorted(f"text {i}".encode() for i in range(12))
    assert sorted(phase_two) == sorted(f"text {i}".encode() for i in range(12, 24))
    assert not set(phase_one) & set(phase_two)
