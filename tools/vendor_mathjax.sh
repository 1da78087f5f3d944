#!/usr/bin/env bash
# Regenerate book/_static/mathjax/ from the npm registry. The vendored files are committed, so
# building the book never needs npm or network; run this only to change the MathJax version.
set -euo pipefail

version="${MATHJAX_VERSION:-3.2.2}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$repo_root/book/_static/mathjax"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "mathjax@$version" >/dev/null && tar xzf "mathjax-$version.tgz")
src="$work/package/es5"

# tex-chtml.js loads its fonts from "[mathjax]/output/chtml/fonts/woff-v2", where [mathjax] is the
# directory the script itself was loaded from; fail loudly if a new version changes that.
grep -q 'resolvePath("output/chtml/fonts/woff-v2"' "$src/tex-chtml.js" \
  || { echo "tex-chtml.js no longer loads fonts from output/chtml/fonts/woff-v2" >&2; exit 1; }

rm -rf "$dest"
mkdir -p "$dest/output/chtml/fonts"
cp "$src/tex-chtml.js" "$dest/"
cp -r "$src/output/chtml/fonts/woff-v2" "$dest/output/chtml/fonts/"
# TeX extensions that MathJax loads on demand (\boldsymbol, \cancel, \color, mathtools, ...).
mkdir -p "$dest/input/tex"
cp -r "$src/input/tex/extensions" "$dest/input/tex/"
cp "$work/package/LICENSE" "$dest/LICENSE"
echo "vendored MathJax $version into ${dest#"$repo_root"/}"
