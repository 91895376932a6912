"""CPU profile of the gateway and the toolhost under direct calls:
``python -m research.direct.profile SECONDS OUT_DIR [SESSIONS]``.

A temporary stack with the time server (as ``bench direct`` runs it); SESSIONS (8) SDK sessions call
``/mcp/servers/time`` back to back while ``py-spy record`` (installed apart: a tool, not a
dependency) samples the gateway and the toolhost; flame graphs and raw collapsed stacks go to
OUT_DIR. Prints each process's name and pid, and the calls per second.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from pathlib import Path

from deploy.bench.direct import ARGS, TOOL, _http_session
from research.direct.stack import time_stack


def main(seconds: float, out: Path, sessions_n: int = 8) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with time_stack() as ours:
        handle, url, headers = ours.handle, ours.url, ours.headers
        pids = {
            child.spec.name: child.proc.pid
            for child in handle.stack.children
            if child.proc is not None
            and child.spec.name in {"gateway", "toolhost", "learning-worker"}
        }
        print(pids, flush=True)

        async def load() -> float:
            async with contextlib.AsyncExitStack() as stack:
                sessions = [
                    await stack.enter_async_context(_http_session(url, headers))
                    for _ in range(sessions_n)
                ]
                for s in sessions:
                    await s.call_tool(TOOL, ARGS)
                spies = [
                    subprocess.Popen(
                        [
                            "py-spy",
                            "record",
                            "-p",
                            str(pid),
                            "-d",
                            str(int(seconds)),
                            "-r",
                            "200",
                            "--subprocesses",
                            "--gil",
                            "-f",
                            fmt,
                            "-o",
                            str(out / f"{name}.{ext}"),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    for name, pid in pids.items()
                    for fmt, ext in (("raw", "txt"),)
                ]
                done = 0
                deadline = time.monotonic() + seconds

                async def loop(s) -> None:  # type: ignore[no-untyped-def]
                    nonlocal done
                    while time.monotonic() < deadline:
                        await s.call_tool(TOOL, ARGS)
                        done += 1

                await asyncio.gather(*(loop(s) for s in sessions))
                for spy in spies:
                    spy.wait()
                return done / seconds

        print({"calls_per_s": round(asyncio.run(load()), 1)}, flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 8)
