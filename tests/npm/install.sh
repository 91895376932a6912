#!/usr/bin/env bash
# Published npm MCP servers the integration tests drive over stdio (installed, never fetched at run time).
set -euo pipefail
cd "$(dirname "$0")"
if [ -f package.json ]; then
  npm install --no-audit --no-fund --loglevel=error
fi
