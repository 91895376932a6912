"""`bench install` reads where pip's time went from its timestamped log and the RECORD files."""

from __future__ import annotations

from pathlib import Path

from deploy.bench.install import installed, phases

LOG = """\
2026-11-28T12:24:34,964 Using pip 23.2.1
2026-11-28T12:24:42,978   Collecting setuptools>=69
2026-11-28T12:24:52,727   Successfully installed setuptools-84.2.1
2026-11-28T12:25:03,000 Collecting alembic>=1.13 (from agentcards==0.1.0)
2026-11-28T12:25:05,000 Processing /opt/pypi/files/scipy-1.17.1-cp311.whl (from agentcards==0.1.0)
2026-11-28T12:25:25,000 Collecting mcp>=2.3 (from agentcards==0.1.0)
2026-11-28T12:25:27,000 Building wheels for collected packages: agentcards
2026-11-28T12:25:37,000 Installing collected packages: alembic, scipy, mcp, agentcards
2026-11-28T12:26:37,000 Successfully installed alembic-1.18 scipy-1.17.1 mcp-2.3 agentcards-0.1.0
"""


def test_phases_split_the_install_where_pip_moved_on() -> None:
    result = phases(LOG.splitlines())
    assert result["build_environment_s"] == 28.0  # setuptools for the build, before our deps
    assert result["resolve_and_download_s"] == 24.0
    assert result["build_editable_s"] == 10.0
    assert result["unpack_and_compile_s"] == 60.0
    assert result["total_s"] == 122.0
    assert list(result["slowest_to_collect_s"].items())[:2] == [("scipy", 20.0), ("alembic", 2.0)]


def test_installed_sums_each_distribution_from_its_record(tmp_path: Path) -> None:
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "a.bin").write_bytes(b"x" * 3 * 2**20)
    (tmp_path / "small.py").write_text("pass\n")
    for dist, files in (("big-1.0", ["big/a.bin"]), ("small-2.0", ["small.py"])):
        info = tmp_path / f"{dist}.dist-info"
        info.mkdir()
        (info / "RECORD").write_text("".join(f"{f},sha256=x,1\n" for f in files))
    result = installed(tmp_path)
    assert result["distributions"] == 2 and result["files"] == 2
    assert [(d["distribution"], d["mib"]) for d in result["largest"]] == [
        ("big", 3.0),
        ("small", 0.0),
    ]
