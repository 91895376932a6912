"""A broken mcpServers file: the error names the file, the line and the column of what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.toolhost.servers import load_servers
from shared.errors import ConfigError

TYPO = """{
  "mcpServers": {
    "time": {"command": "python"},
    "example": {
      "comand": "python",
      "args": ["-m", "deploy.examples.example_server"]
    }
  }
}
"""


@pytest.mark.parametrize(
    ("content", "line", "column", "message"),
    [
        (TYPO, 5, 7, "server 'example': missing 'command' (a stdio server needs it); unknown key 'comand'"),
        ('{\n  "servers": {}\n}', 2, 3, 'expected the top-level key "mcpServers" (found \'servers\')'),
        ('{"mcpServers": {},\n "extra": 1}', 2, 2, "unknown top-level key(s) extra"),
        ('{"mcpServers": {"s": {"command": "x", "args": ["a", 3]}}}', 1, 53, "'args.1': Input should be a valid string"),
        ('{"mcpServers": {"s": {"url": "ftp://h"}}}', 1, 23, "http:// or https://"),
        ('{"mcpServers": {\n  "a.b": {"command": "x"}}}', 2, 3, "server name 'a.b'"),
        ('{"mcpServers": {\n  "s": {"command": "x",}}}', 2, 24, "not valid JSON"),
    ],
)  # fmt: skip
def test_error_names_file_line_and_column(
    tmp_path: Path, content: str, line: int, column: int, message: str
) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_servers(path)
    error = info.value
    assert message in error.message and str(path) in error.message
    assert f"line {line} column {column}" in error.message
    assert error.details == {"file": str(path), "line": line, "column": column}
