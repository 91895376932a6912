"""`agentcards bench install`: where the time of `pip install -e .` goes on a fresh environment.

A new venv without the system's site-packages, torch installed first as the README says
(timed apart), then `pip install --no-cache-dir -e <this checkout>` with pip's timestamped
log. From the log: the phases (the build environment, resolving and downloading, building
the editable wheel, unpacking and byte-compiling the wheels), the packages that took longest
to collect (the time until the next one started: download and metadata), and from each
installed distribution's RECORD its size and file count (unpacking and byte-compiling go with
files and bytes). Needs the registries pip is configured for; nothing of this machine's
Python is touched.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TORCH = "torch==2.13.0"
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3}) (.*)$")
_COLLECT = re.compile(r"^\s*(?:Collecting|Processing) (\S+)")
_MIB = 2**20


def _name(requirement: str) -> str:
    base = requirement.rsplit("/", 1)[-1]
    return re.split(r"[<>=!~\[;]|-\d", base, maxsplit=1)[0].lower().replace("_", "-")


def phases(log_lines: list[str]) -> dict[str, Any]:
    """Seconds per phase of a `pip install --log` of a project, and the slowest collections."""
    stamped = [
        (datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S,%f"), m[2])
        for m in map(_STAMP.match, log_lines)
        if m
    ]
    if not stamped:
        raise ValueError("no timestamped lines: not a pip --log file")
    start, end = stamped[0][0], stamped[-1][0]
    first_collect = next(
        (t for t, body in stamped if "(from " in body and _COLLECT.match(body)), start
    )
    built = next(
        (t for t, body in stamped if "Building wheels for collected packages" in body), None
    )
    installing = [
        t for t, body in stamped if body.lstrip().startswith("Installing collected packages")
    ]
    done = [t for t, body in stamped if body.lstrip().startswith("Successfully installed")]
    unpack_from = installing[-1] if installing else end
    finished = done[-1] if done else end
    collections = [(t, _name(m[1])) for t, body in stamped if (m := _COLLECT.match(body))]
    collect_end = built or unpack_from
    slowest: dict[str, float] = {}
    for (t, name), (t_next, _) in zip(
        collections, [*collections[1:], (collect_end, "")], strict=True
    ):
        if first_collect <= t <= collect_end:
            slowest[name] = slowest.get(name, 0.0) + (t_next - t).total_seconds()

    def seconds(a: datetime, b: datetime) -> float:
        return round(max(0.0, (b - a).total_seconds()), 1)

    return {
        "build_environment_s": seconds(start, first_collect),
        "resolve_and_download_s": seconds(first_collect, collect_end),
        "build_editable_s": seconds(collect_end, unpack_from) if built else 0.0,
        "unpack_and_compile_s": seconds(unpack_from, finished),
        "total_s": seconds(start, finished),
        "slowest_to_collect_s": {
            name: round(s, 1) for name, s in sorted(slowest.items(), key=lambda kv: -kv[1])[:15]
        },
    }


def installed(site_packages: Path, *, top: int = 25) -> dict[str, Any]:
    """Size and file count of each distribution in ``site_packages``, from its RECORD."""
    rows: list[tuple[int, int, str]] = []
    for record in site_packages.glob("*.dist-info/RECORD"):
        dist = record.parent.name.removesuffix(".dist-info").rsplit("-", 1)[0]
        size = files = 0
        with record.open(newline="") as f:
            for row in csv.reader(f):
                path = site_packages / row[0]
                if path.is_file():
                    size, files = size + path.stat().st_size, files + 1
        rows.append((size, files, dist))
    rows.sort(reverse=True)
    return {
        "total_mib": round(sum(r[0] for r in rows) / _MIB, 1),
        "files": sum(r[1] for r in rows),
        "distributions": len(rows),
        "largest": [
            {"distribution": dist, "mib": round(size / _MIB, 1), "files": files}
            for size, files, dist in rows[:top]
        ],
    }


def _timed(argv: list[str], log: Path) -> float:
    started = time.monotonic()
    with log.open("wb") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: see {log}")
    return round(time.monotonic() - started, 1)


def run(keep: bool = False) -> dict[str, Any]:
    """Install this checkout into a fresh venv and say where the time went."""
    out: dict[str, Any] = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}
    tmp = Path(tempfile.mkdtemp(prefix="agentcards-install-"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir"]
    out["torch_s"] = _timed([*pip, TORCH], tmp / "torch.out")
    site = next((venv / "lib").glob("python3*/site-packages"))
    before = installed(site)
    log = tmp / "pip.log"
    out["pip_install_e_s"] = _timed([*pip, "--log", str(log), "-e", str(ROOT)], tmp / "pip.out")
    out["phases"] = phases(log.read_text(errors="replace").splitlines())
    after = installed(site)
    out["installed_with_torch"] = before
    out["installed"] = after
    out["load_avg_end"] = os.getloadavg()
    if keep:
        out["venv"] = str(venv)
    else:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return out
