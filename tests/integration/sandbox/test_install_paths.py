"""The sandbox runs wherever the project is installed: under /tmp, under a path with spaces, read-only.

CI checkouts, throwaway virtualenvs and `pip install --target` trials live under /tmp, which is
also where the sandbox mounts each run's private tmpfs: the view must still show the files it
binds from there (the interpreter's, the Deno binary), and nothing else of the host's /tmp.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.sandbox.fsplan import find_deno

REPO = Path(__file__).resolve().parents[3]
PACKAGES = ("shared", "services", "workers", "deploy")
# Lists what the run sees of the install's folder and reads a file beside it (which it must not see).
PROBE = {
    "python": (
        "import os\n"
        "seen = sorted(os.listdir(args['install'])) if os.path.isdir(args['install']) else None\n"
        "try:\n"
        "    secret = open(args['secret']).read()\n"
        "except OSError as exc:\n"
        "    secret = type(exc).__name__\n"
        "open('/tmp/scratch', 'w').write('ok')\n"
        "return {'seen': seen, 'secret': secret, 'tmp': open('/tmp/scratch').read()}\n"
    ),
    "typescript": (
        "let seen: string[] | null = [];\n"
        "try { for (const e of Deno.readDirSync(args.install)) seen.push(e.name); } catch { seen = null; }\n"
        "let secret: string;\n"
        "try { secret = Deno.readTextFileSync(args.secret); } catch (e) { secret = (e as Error).name; }\n"
        "return { seen: seen && seen.sort(), secret };\n"
    ),
}
SUFFIX = {"python": ".py", "typescript": ".ts"}


@pytest.fixture
def under_tmp() -> Iterator[Path]:
    """A folder right under /tmp (pytest's own tmp root may be elsewhere, by TMPDIR)."""
    folder = Path(tempfile.mkdtemp(prefix="agentcards-install-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _venv_with_deno(where: Path) -> Path:
    """A virtualenv at ``where`` that sees this install of agentcards and has its own Deno binary."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(where)],
        check=True,
    )
    deno = find_deno()
    assert deno is not None, "the deno package (a dependency) is not installed"
    os.link(deno, where / "bin" / "deno")  # where its pip install puts it: the venv's scripts
    return where / "bin" / "python"


def _run(
    python: Path, code: Path, args: dict[str, str], *, prefix: list[str], cwd: Path, path: Path
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCARDS_")}
    env["PYTHONPATH"] = str(path)
    done = subprocess.run(
        [*prefix, str(python), "-m", "deploy.cli.main", "sandbox", "run", str(code), "--args", json.dumps(args)],
        capture_output=True, text=True, timeout=180, cwd=cwd, env=env,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert lines, f"no output (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(lines[-1])


def _check(result: dict[str, Any], seen: list[str] | None) -> None:
    assert result["status"] == "succeeded", result["error"]
    assert all(
        result["layers"][layer]
        for layer in ("filesystem_view", "private_tmp", "landlock", "seccomp")
    )
    # The run sees what the view binds of the install (its Deno binary) and nothing else of it.
    assert result["result"]["seen"] == seen
    # Deno's own permissions refuse the read (NotCapable) before the view would.
    assert result["result"]["secret"] in {"FileNotFoundError", "NotFound", "NotCapable"}
    if "tmp" in result["result"]:  # Python's /tmp stays writable (Deno's permissions forbid writes)
        assert result["result"]["tmp"] == "ok"


@pytest.mark.parametrize("language", ["python", "typescript"])
def test_runs_from_a_virtualenv_under_tmp_with_spaces(under_tmp: Path, language: str) -> None:
    tmp_path = under_tmp
    install = tmp_path / "an install" / "venv"
    python = _venv_with_deno(install)
    (install / "secret.txt").write_text("host data")
    code = tmp_path / f"job{SUFFIX[language]}"
    code.write_text(PROBE[language])
    args = {"install": str(install), "secret": str(install / "secret.txt")}
    result = _run(python, code, args, prefix=[], cwd=tmp_path, path=REPO)
    _check(result, ["bin"] if language == "python" else None)


@pytest.mark.parametrize("language", ["python", "typescript"])
def test_runs_from_a_read_only_checkout_under_tmp(under_tmp: Path, language: str) -> None:
    tmp_path = under_tmp
    checkout = tmp_path / "read only checkout"
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, checkout / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (checkout / "secret.txt").write_text("host data")
    code = tmp_path / f"job{SUFFIX[language]}"
    code.write_text(PROBE[language])
    args = {"install": str(checkout), "secret": str(checkout / "secret.txt")}
    # Root ignores file modes: the checkout is made read-only by a read-only bind mount in a
    # mount namespace of the command's own, which the sandbox's namespaces then nest in.
    quoted = str(checkout).replace("'", "'\\''")
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
              f"mount --bind '{quoted}' '{quoted}' && mount -o remount,bind,ro '{quoted}' && "
              f"! touch '{quoted}/probe' 2>/dev/null && exec \"$@\"", "sh"]  # fmt: skip
    result = _run(Path(sys.executable), code, args, prefix=prefix, cwd=checkout, path=checkout)
    _check(result, None)  # nothing of the checkout is bound
