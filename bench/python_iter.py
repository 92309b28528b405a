"""Messages per second through ``Session.run``'s async iterator (``make bench``).

A scripted server on 127.0.0.1 streams one long text answer (one word per delta); the script
iterates the run and counts messages. The numbers include the HTTP stream, SSE parsing, the
engine and the Python bridge: what a consumer of ``async for`` sees. Printed, never asserted.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests_py"))

import penguin_harness as ph
from scripted_server import ScriptedServer, text

WORDS = 20_000
ROUNDS = 5


async def one_round(session: ph.Session) -> tuple[int, float]:
    count = 0
    start = time.perf_counter()
    async for _msg in session.run("talk"):
        count += 1
    return count, time.perf_counter() - start


async def main() -> None:
    answer = " ".join(f"w{i}" for i in range(WORDS))
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(repeat=text(answer)) as server:
        agent = ph.create_agent(root=tmp)
        model = ph.Model("bench", "scripted", server.openai_base_url, api_key="k")
        with agent.create_session(model=model) as session:
            await one_round(session)  # warm-up: connection, first trace write
            rates = []
            for _ in range(ROUNDS):
                count, secs = await one_round(session)
                rates.append(count / secs)
    print(f"python_iter: {count} messages per run, {ROUNDS} runs")
    print(
        f"python_iter: median {statistics.median(rates):,.0f} msg/s, best {max(rates):,.0f} msg/s"
    )
    print(f"python_iter: {1e6 / statistics.median(rates):.2f} us per message (median)")


if __name__ == "__main__":
    asyncio.run(main())
