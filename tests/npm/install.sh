#!/usr/bin/env bash
# Published npm MCP servers the integration tests drive over stdio: installed here, never
# fetched at test time (the fixtures run the binaries from this prefix).
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFIX="${AGENTCARDS_TEST_NPM_PREFIX:-.cache/npm}"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
  @modelcontextprotocol/server-memory@2026.8.31 \
  @modelcontextprotocol/server-everything@2026.8.31 \
  @modelcontextprotocol/server-filesystem@2026.8.31
test -x "$PREFIX/node_modules/.bin/mcp-server-memory"
test -x "$PREFIX/node_modules/.bin/mcp-server-everything"
test -x "$PREFIX/node_modules/.bin/mcp-server-filesystem"
