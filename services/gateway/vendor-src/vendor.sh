#!/usr/bin/env bash
# Copy the dashboard's and /docs' third-party browser code from npm into the gateway package.
# `npm ci` installs exactly package-lock.json (integrity-checked by npm; --ignore-scripts: no
# install hooks run, e.g. swagger-ui-dist's telemetry dependency); then only the files the
# pages load, and each package's licence, go to ../static/vendor/<package>/ (flat), and
# MANIFEST.json records each package's version, lock integrity and every copied file's
# sha256 (tests/unit/gateway/test_vendor_manifest.py checks all three). Commit the result.
set -euo pipefail
cd "$(dirname "$0")"
OUT=../static/vendor
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
rm -rf "$OUT"
# package: files to copy (paths inside node_modules/<package>)
FILES=(
  "cytoscape:dist/cytoscape.min.js LICENSE"
  "cytoscape-fcose:cytoscape-fcose.js LICENSE"
  "cose-base:cose-base.js LICENSE"
  "layout-base:layout-base.js LICENSE"
  "prismjs:prism.js components/prism-python.min.js components/prism-typescript.min.js themes/prism.min.css LICENSE"
  "swagger-ui-dist:swagger-ui-bundle.js swagger-ui.css favicon-32x32.png LICENSE NOTICE"
)
for entry in "${FILES[@]}"; do
  package=${entry%%:*}
  for file in ${entry#*:}; do
    mkdir -p "$OUT/$package"
    cp "node_modules/$package/$file" "$OUT/$package/"  # flat: "dist/" is gitignored
  done
done
python3 - "$OUT" <<'PY'
import hashlib, json, pathlib, sys
out = pathlib.Path(sys.argv[1])
lock = json.loads(pathlib.Path("package-lock.json").read_text())["packages"]
manifest = {}
for folder in sorted(p for p in out.iterdir() if p.is_dir()):
    entry = lock[f"node_modules/{folder.name}"]
    files = {
        str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(folder.rglob("*")) if f.is_file()
    }
    manifest[folder.name] = {"version": entry["version"], "integrity": entry["integrity"], "files": files}
(out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
PY
echo "vendored into $(cd "$OUT" && pwd)"
