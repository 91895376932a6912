"""The stack the direct-call studies measure: the time server alone (as ``bench direct`` runs
it), synced, with an API key; what a study needs to call ``/mcp/servers/time``."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from deploy.bench.direct import TOOL, _key, _write_config, venv_python
from deploy.bench.e2e import wait_synced
from deploy.launcher.harness import StackHandle, temporary_stack


@dataclass(frozen=True)
class TimeStack:
    handle: StackHandle
    url: str  # /mcp/servers/time
    headers: dict[str, str]  # the key's


@contextlib.contextmanager
def time_stack(extra_env: dict[str, str] | None = None) -> Iterator[TimeStack]:
    with tempfile.TemporaryDirectory(prefix="agentcards-direct-") as tmp:
        config = _write_config(Path(tmp) / "m.json", venv_python(), agentcards=True, only_time=True)
        with temporary_stack(mcp_config=config, extra_env=extra_env) as handle:
            database_url = handle.settings.database_url or ""
            wait_synced(database_url, f"time:{TOOL}")
            headers = {"Authorization": f"Bearer {_key(database_url)}"}
            yield TimeStack(handle, f"{handle.gateway_url}/mcp/servers/time", headers)
