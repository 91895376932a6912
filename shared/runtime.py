"""How a long-running process sets its interpreter up once it has started.

- ``freeze_long_lived``: Python's full collection walks every object the collector tracks.
  A gateway that holds the embedding model tracks ~345k objects after its warm-up: each
  full collection then stops the whole process for ~220 ms (the toolhost, ~157k objects
  after its imports: ~105 ms), and under steady load one came every second or two, stalling
  every request in flight at once. The imports, the model and the start-up state live as
  long as the process; ``gc.freeze`` moves them to the permanent generation, which no
  collection walks again. Each long-running process calls it once what it loads at start is
  loaded: the gateway after its search warm-up, the toolhost before it serves, each Celery
  worker after its imports and each pool process once it started (the learning worker's
  again after its model's warm-up).
- ``name_async_library``: anyio, under the MCP SDK, asks sniffio which library runs on
  every stream operation; without the name set, sniffio searches (a few % of a call).
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def freeze_long_lived(what: str) -> None:
    """Move every object tracked now to the permanent generation (``what``: for the log)."""
    gc.freeze()
    log.debug("%s: %d objects out of the collector's reach", what, gc.get_freeze_count())


def name_async_library() -> None:
    """Name the async library once, as ``anyio.run`` does, before the event loop starts (its
    tasks inherit the name). Without sniffio installed, anyio asks asyncio directly."""
    try:
        import sniffio
    except ImportError:
        return
    sniffio.current_async_library_cvar.set("asyncio")
