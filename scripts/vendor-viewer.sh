#!/usr/bin/env bash
# Refresh the layout library the HTML viewer inlines: @dagrejs/dagre's standalone build, from its
# npm package, with its licence and version recorded (dispatchtrace/render/viewer/vendor/).
# Usage: scripts/vendor-viewer.sh [VERSION]   (default: the version in vendor/VERSIONS)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=dispatchtrace/render/viewer/vendor
VERSION="${1:-$(sed -n 's/^@dagrejs\/dagre //p' "$DEST/VERSIONS")}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && npm pack --silent "@dagrejs/dagre@$VERSION" >/dev/null && tar xzf dagrejs-dagre-"$VERSION".tgz)
# the source-map comment is dropped: the page must name no file it could fetch
grep -v '^//# sourceMappingURL=' "$TMP/package/dist/dagre.min.js" > "$DEST/dagre.min.js"
cp "$TMP/package/LICENSE" "$DEST/dagre.LICENSE"
printf '@dagrejs/dagre %s\n' "$VERSION" > "$DEST/VERSIONS"
echo "vendored @dagrejs/dagre $VERSION ($(wc -c < "$DEST/dagre.min.js") bytes) into $DEST" >&2
