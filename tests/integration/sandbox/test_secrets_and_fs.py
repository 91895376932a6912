"""Attacks on secrets and the filesystem: each must fail with a clear error and leave the host intact."""

from __future__ import annotations

import site
from pathlib import Path

from tests.integration.sandbox.conftest import SECRET, Run

PROJECT = str(Path(__file__).resolve().parents[3])


async def test_environment_is_empty_and_secret_free(run: Run, host_intact) -> None:
    code = """
import os
found = {}
found["environ"] = dict(os.environ)
for path in ["/proc/self/environ", "/proc/1/environ", "/proc/%d/environ" % os.getppid()]:
    try:
        found[path] = open(path, "rb").read().decode(errors="replace")
    except OSError as e:
        found[path] = type(e).__name__
others = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            others[pid] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
            others[pid + "-cmdline"] = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError as e:
            others[pid] = type(e).__name__
found["others"] = others
found
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert set(outcome.result["environ"]) <= {"LC_CTYPE"}
    assert SECRET not in str(outcome.result)
    assert "AGENTCARDS" not in str(outcome.result)
    # The pid namespace shows only the sandbox's own process(es).
    assert all(int(p.split("-")[0]) < 50 for p in outcome.result["others"])
    await host_intact()


async def test_no_credentials_in_interpreter_memory(run: Run, host_intact) -> None:
    code = """
import gc, sys
# Built at run time so the needle is not in this source text (which the child holds).
needle = "S3cret" + "Passw0rd"
raw = needle.encode()
hits = []
for obj in gc.get_objects():
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for v in values:
        if isinstance(v, str) and v is not needle and needle in v:
            hits.append(v[:80])
        if isinstance(v, bytes) and v is not raw and raw in v:
            hits.append(repr(v[:80]))
hits
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == []
    await host_intact()


async def test_cannot_read_host_files(run: Run, host_intact) -> None:
    code = """
import os
out = {}
for path in ["/etc/shadow", "/etc/passwd", "/root/.bashrc", args.project + "/pyproject.toml",
             "/proc/1/root/etc/shadow", "/proc/self/root/etc/shadow", "/sys/kernel/notes"]:
    try:
        open(path, "rb").read(10)
        out[path] = "READ"
    except OSError as e:
        out[path] = type(e).__name__
out
"""
    outcome = await run(code, args={"project": PROJECT})
    assert outcome.status == "succeeded", outcome.error
    assert "READ" not in outcome.result.values(), outcome.result
    await host_intact()


async def test_cannot_write_outside_private_tmp(run: Run, host_intact) -> None:
    targets = [
        "/evil",
        "/usr/lib/evil",
        site.getsitepackages()[0] + "/evil.py",
        PROJECT + "/evil.py",
        "/proc/sysrq-trigger",
        "/dev/evil",
    ]
    code = """
out = {}
for path in args.targets:
    try:
        with open(path, "w") as f:
            f.write("x")
        out[path] = "WROTE"
    except OSError as e:
        out[path] = type(e).__name__
out
"""
    outcome = await run(code, args={"targets": targets})
    assert outcome.status == "succeeded", outcome.error
    assert "WROTE" not in outcome.result.values(), outcome.result
    for path in targets:
        assert not Path(path).exists() or path in ("/proc/sysrq-trigger",)
    await host_intact()


async def test_site_packages_and_project_are_not_mounted(run: Run, host_intact) -> None:
    code = """
import os
[os.listdir(p) if os.path.isdir(p) else None for p in args.paths]
"""
    paths = [site.getsitepackages()[0], PROJECT]
    outcome = await run(code, args={"paths": paths})
    assert outcome.status == "succeeded", outcome.error
    assert all(not listing for listing in outcome.result), outcome.result
    await host_intact()


async def test_symlink_tricks_stay_inside(run: Run, host_intact) -> None:
    code = """
import os
out = {}
for i, target in enumerate(["/etc/shadow", "/proc/1/root/etc/shadow", "../../../../etc/shadow", "/"]):
    link = f"/tmp/l{i}"
    os.symlink(target, link)
    try:
        out[target] = "READ:" + str(len(open(link + ("/etc/shadow" if target == "/" else ""), "rb").read()))
    except OSError as e:
        out[target] = type(e).__name__
try:
    os.link("/usr/lib", "/tmp/hard")
    out["hardlink"] = "LINKED"
except OSError as e:
    out["hardlink"] = type(e).__name__
out
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert not any(str(v).startswith(("READ", "LINKED")) for v in outcome.result.values()), (
        outcome.result
    )
    await host_intact()


async def test_fill_tmp_hits_its_cap(run: Run, host_intact) -> None:
    code = """
import errno
written = 0
try:
    with open("/tmp/fill", "wb") as f:
        while True:
            f.write(b"x" * (1 << 20))
            f.flush()
            written += 1
except OSError as e:
    code = errno.errorcode.get(e.errno, str(e.errno))
{"mb": written, "error": code}
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result["error"] in {"ENOSPC", "EFBIG"}
    assert outcome.result["mb"] <= 16
    assert not Path("/tmp/fill").exists()
    await host_intact()


async def test_inherited_fds_are_only_stdio_and_channel(run: Run, host_intact) -> None:
    code = """
import os
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
fds
"""
    outcome = await run(code)
    assert outcome.status == "succeeded", outcome.error
    targets = outcome.result
    assert {targets[k] for k in ("0", "1", "2")} == {"/dev/null"}
    others = [t for k, t in targets.items() if k not in ("0", "1", "2")]
    # channel + asyncio's self-pipe pair + epoll, plus the fd listing /proc itself
    assert all(t.startswith(("socket:", "anon_inode:[eventpoll]", "/proc/")) for t in others), (
        targets
    )
    assert sum(t.startswith("socket:") for t in others) == 3, targets
    await host_intact()
