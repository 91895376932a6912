"""The vendored browser code is exactly what package-lock.json pins, byte for byte, with licences."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

GATEWAY = Path(__file__).resolve().parents[3] / "services" / "gateway"
VENDOR = GATEWAY / "static" / "vendor"
SRC = GATEWAY / "vendor-src"


def _manifest() -> dict[str, dict[str, object]]:
    data: dict[str, dict[str, object]] = json.loads((VENDOR / "MANIFEST.json").read_text())
    return data


def test_each_vendored_package_is_the_locked_version_and_integrity() -> None:
    lock = json.loads((SRC / "package-lock.json").read_text())["packages"]
    wanted = json.loads((SRC / "package.json").read_text())["dependencies"]
    manifest = _manifest()
    assert set(manifest) == set(wanted)
    for name, entry in manifest.items():
        locked = lock[f"node_modules/{name}"]
        assert entry["version"] == locked["version"] == wanted[name], name
        assert entry["integrity"] == locked["integrity"], name
        assert str(entry["integrity"]).startswith("sha512-"), name


def test_every_committed_file_matches_its_recorded_hash_and_each_has_a_licence() -> None:
    manifest = _manifest()
    on_disk = {
        str(p.relative_to(VENDOR))
        for p in VENDOR.rglob("*")
        if p.is_file() and p.name != "MANIFEST.json"
    }
    recorded = {f"{name}/{f}" for name, entry in manifest.items() for f in entry["files"]}  # type: ignore[attr-defined]
    assert on_disk == recorded  # nothing unrecorded, nothing missing
    for name, entry in manifest.items():
        files: dict[str, str] = entry["files"]  # type: ignore[assignment]
        assert "LICENSE" in files, f"{name} is vendored without its licence"
        for rel, digest in files.items():
            assert hashlib.sha256((VENDOR / name / rel).read_bytes()).hexdigest() == digest, rel


def test_the_pages_load_no_third_party_host() -> None:
    static = GATEWAY / "static"
    for page in [*static.glob("*.html"), *static.glob("*.js"), GATEWAY / "rest" / "docs.py"]:
        text = page.read_text()
        assert "cdn." not in text and "unpkg" not in text and "googleapis" not in text, page
