"""Gateway-specific wiring of the shared settings: the resources every request may use."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from celery import Celery
from psycopg_pool import ConnectionPool

from shared.config import Settings


@dataclass
class GatewayState:
    """Long-lived clients opened at start-up and closed at shutdown."""

    settings: Settings
    pool: ConnectionPool
    redis: redis.Redis
    celery: Celery
