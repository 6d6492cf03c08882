#!/usr/bin/env bash
# Check that port/greenlet-thread-cleanup.patch still applies to greenlet's PyPI sdist, with both
# `git apply` and `patch -p1`, and that the locking facts the change relies on hold in the patched
# tree (port/apply_fix.py --check-locking). Needs only pip, git, patch and python3; builds nothing.
#
#   port/check_patch.sh [--version 3.5.6] [--sdist PATH]
#
# --sdist uses an sdist already on disk instead of downloading one. Exit status: 0 if every check
# passed, 1 if one failed, 2 on a bad argument.
set -euo pipefail
PORT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PATCH="$PORT/greenlet-thread-cleanup.patch"
VERSION=3.5.6
SDIST=
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --version) VERSION="$2"; shift 2 ;;
        --sdist) SDIST="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "check_patch.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

T0=$(date +%s)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if [ -z "$SDIST" ]; then
    python3 -m pip download --quiet --no-deps --no-binary :all: "greenlet==$VERSION" -d "$TMP/dl"
    SDIST="$TMP/dl/greenlet-$VERSION.tar.gz"
fi
[ -f "$SDIST" ] || { echo "check_patch.sh: no sdist at $SDIST" >&2; exit 1; }

unpack() { mkdir -p "$TMP/$1" && tar xzf "$SDIST" -C "$TMP/$1" --strip-components=1; }
unpack git-apply
unpack patch-p1
# GIT_CEILING_DIRECTORIES: the temporary tree must not be taken for part of an enclosing repository.
(cd "$TMP/git-apply" && GIT_CEILING_DIRECTORIES="$TMP" git apply --check --whitespace=error-all "$PATCH" \
    && GIT_CEILING_DIRECTORIES="$TMP" git apply "$PATCH")
echo "git apply: ok"
(cd "$TMP/patch-p1" && patch -p1 --dry-run --force --quiet < "$PATCH" > /dev/null && patch -p1 --force --quiet < "$PATCH")
diff -r "$TMP/git-apply" "$TMP/patch-p1" > /dev/null \
    || { echo "check_patch.sh: git apply and patch -p1 gave different trees" >&2; exit 1; }
echo "patch -p1: ok (same tree as git apply)"
python3 "$PORT/apply_fix.py" --check-locking "$TMP/git-apply" > "$TMP/locking.txt" \
    || { echo "check_patch.sh: the locking check failed on the patched tree" >&2; exit 1; }
echo "locking facts hold in the patched tree ($(wc -l < "$TMP/locking.txt") checked)"
echo "check_patch.sh: greenlet $VERSION: all checks passed in $(( $(date +%s) - T0 )) s"
