#!/usr/bin/env bash
# Build greenlet 3.5.6 with each cleanup policy into its own venv per interpreter.
#
#   port/build.sh [--variants stock,seed,scheduled,robust] [--pythons 3.11.7,3.12.1,3.13.0]
#                 [--jobs N] [--force]
#
# Downloads the sdist with pip into port/work/dl, unpacks a fresh tree per variant under
# port/work/src/<variant>, applies port/apply_fix.py <variant> (for robust: the committed
# port/greenlet-thread-cleanup.patch plus the test-only delay hook), and builds + installs it into
# port/work/venv-<variant>-<pyver> (each build from its own copy under port/work/build/ so that
# builds can run in parallel). A venv whose stamp records the same patch hash (the sdist's sha256
# plus the path and sha256 of every file the variant changed or added) is skipped. Every step
# takes a per-item flock, so two build.sh runs at once do not trample each other. The diff of each
# variant against the pristine sources is written to port/work/diff/<variant>.diff, and the
# locking facts to port/work/diff/locking.txt.
set -euo pipefail

PORT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$PORT/work"
VERSION=3.5.6
VARIANTS=stock,seed,scheduled,robust
PYTHONS=3.11.7,3.12.1,3.13.0
JOBS=2
FORCE=0
PYENV_ROOT="${PYENV_ROOT:-$HOME/.pyenv}"

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --variants) VARIANTS="$2"; shift 2 ;;
        --pythons) PYTHONS="$2"; shift 2 ;;
        --jobs) JOBS="$2"; shift 2 ;;
        --force) FORCE=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

mkdir -p "$WORK/dl" "$WORK/src" "$WORK/build" "$WORK/locks" "$WORK/logs" "$WORK/diff"
# Aliases (shielded = robust) resolve to the variant's own name, so both name the same venv.
VARIANTS=$(python3 "$PORT/apply_fix.py" --canonical "$VARIANTS") || { echo "build.sh: see above" >&2; exit 2; }
IFS=, read -r -a VARIANT_LIST <<< "$VARIANTS"
IFS=, read -r -a PYTHON_LIST <<< "$PYTHONS"
for p in "${PYTHON_LIST[@]}"; do
    [ -x "$PYENV_ROOT/versions/$p/bin/python3" ] \
        || { echo "build.sh: no interpreter $PYENV_ROOT/versions/$p/bin/python3" >&2; exit 2; }
done

FIRST_PY="$PYENV_ROOT/versions/${PYTHON_LIST[0]}/bin/python3"
SDIST="$WORK/dl/greenlet-$VERSION.tar.gz"
(
    flock 9
    if [ ! -f "$SDIST" ]; then
        echo "== downloading greenlet $VERSION sdist"
        "$FIRST_PY" -m pip download --quiet --no-binary :all: --no-deps "greenlet==$VERSION" -d "$WORK/dl"
    fi
) 9>"$WORK/locks/download.lock"
[ -f "$SDIST" ] || { echo "build.sh: pip did not produce $SDIST" >&2; exit 1; }

SDIST_SHA=$(sha256sum "$SDIST" | cut -d' ' -f1)

# Pristine tree, for the diffs.
(
    flock 9
    if [ ! -f "$WORK/src/pristine/.stamp" ] || [ "$(cat "$WORK/src/pristine/.stamp")" != "$SDIST_SHA" ]; then
        rm -rf "$WORK/src/pristine"; mkdir -p "$WORK/src/pristine"
        tar xzf "$SDIST" -C "$WORK/src/pristine" --strip-components=1
        echo "$SDIST_SHA" > "$WORK/src/pristine/.stamp"
    fi
) 9>"$WORK/locks/src-pristine.lock"
# The locking facts the patched variants rely on (apply_fix.py checks them again before patching).
python3 "$PORT/apply_fix.py" --check-locking "$WORK/src/pristine" > "$WORK/diff/locking.txt" \
    || { echo "build.sh: the locking check failed on the pristine tree; not building" >&2; exit 1; }

prepare_tree() {  # variant -> patched tree at $WORK/src/<variant>, its patch hash in .stamp
    # The patch hash is the sdist's sha256 plus the sha256 of every file apply_fix.py changed or
    # added, so editing apply_fix.py or the patch file rebuilds only the variants whose result changed.
    local v="$1"
    (
        flock 9
        local tree="$WORK/src/$v" tmp="$WORK/src/.tmp-$v"
        rm -rf "$tmp"; mkdir -p "$tmp"
        tar xzf "$SDIST" -C "$tmp" --strip-components=1
        python3 "$PORT/apply_fix.py" "$v" "$tmp" >/dev/null
        local h
        # Paths relative to the tree, so that moving port/work (another worktree) keeps the hash.
        h=$( { echo "$SDIST_SHA"; { diff -rq "$WORK/src/pristine" "$tmp" || true; } \
               | awk -v tmp="$tmp" '/^Files / {print $4} index($0, "Only in " tmp) == 1 {sub(/^Only in /, ""); sub(/: /, "/"); print}' \
               | sort | while read -r f; do echo "${f#"$tmp"/} $(sha256sum < "$f" | cut -d' ' -f1)"; done; } \
               | sha256sum | cut -c1-16 )
        if [ "$FORCE" = 1 ] || [ ! -f "$tree/.stamp" ] || [ "$(cat "$tree/.stamp")" != "$h" ]; then
            rm -rf "$tree"; mv "$tmp" "$tree"; echo "$h" > "$tree/.stamp"
            echo "== $v: tree patched ($h)"
        else
            rm -rf "$tmp"
        fi
        (cd "$WORK/src" && diff -ruN pristine/src/greenlet "$v/src/greenlet" > "$WORK/diff/$v.diff" || true)
    ) 9>"$WORK/locks/src-$v.lock"
}

build_one() {  # variant pyver
    local v="$1" p="$2" h; h=$(cat "$WORK/src/$v/.stamp")
    local venv="$WORK/venv-$v-$p" bdir="$WORK/build/$v-$p" log="$WORK/logs/build-$v-$p.log"
    (
        flock 9
        if [ "$FORCE" = 0 ] && [ -f "$venv/.greenlet-port-stamp" ] \
           && [ "$(cat "$venv/.greenlet-port-stamp")" = "$h" ]; then
            echo "== $v on $p: up to date ($h)"
            exit 0
        fi
        local t0; t0=$(date +%s)
        echo "== $v on $p: building ($h), log $log"
        {
            rm -rf "$venv" "$bdir"
            "$PYENV_ROOT/versions/$p/bin/python3" -m venv "$venv"
            "$venv/bin/python" -m pip install --quiet --upgrade pip "setuptools>=77.0.3" wheel
            # Copy the patched tree under a shared lock so a concurrent prepare_tree cannot swap it.
            flock -s "$WORK/locks/src-$v.lock" cp -a "$WORK/src/$v" "$bdir"
            "$venv/bin/python" -m pip install --no-build-isolation --no-deps --no-cache-dir -v "$bdir"
            "$venv/bin/python" -c "import greenlet, greenlet._greenlet; print('greenlet', greenlet.__version__, greenlet._greenlet.__file__)"
        } > "$log" 2>&1 || { echo "== $v on $p: FAILED, see $log" >&2; tail -20 "$log" >&2; exit 1; }
        echo "$h" > "$venv/.greenlet-port-stamp"
        echo "== $v on $p: built in $(( $(date +%s) - t0 )) s"
    ) 9>"$WORK/locks/venv-$v-$p.lock"
}

build_helper() {  # pyver: the test-only porthelper extension used by scenarios/ and probes/
    local p="$1" py="$PYENV_ROOT/versions/$1/bin/python3" out="$WORK/helper-$1"
    local h; h=$(sha256sum "$PORT/helpers/porthelper.cpp" | cut -c1-16)
    (
        flock 9
        [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$h" ] && exit 0
        mkdir -p "$out"
        local inc suf
        inc=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
        suf=$("$py" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
        g++ -O2 -std=c++17 -shared -fPIC -Wall -Wextra -Wno-unused-parameter -I"$inc" \
            "$PORT/helpers/porthelper.cpp" -o "$out/porthelper$suf" -lpthread
        echo "$h" > "$out/.stamp"
        echo "== porthelper for $p built"
    ) 9>"$WORK/locks/helper-$p.lock"
}

START=$(date +%s)
for p in "${PYTHON_LIST[@]}"; do build_helper "$p"; done
for v in "${VARIANT_LIST[@]}"; do prepare_tree "$v"; done

export -f build_one
export WORK PYENV_ROOT FORCE
fail=0
for v in "${VARIANT_LIST[@]}"; do
    for p in "${PYTHON_LIST[@]}"; do printf '%s %s\n' "$v" "$p"; done
done | xargs -P "$JOBS" -L 1 bash -c 'build_one "$0" "$1"' || fail=1
echo "== build.sh: ${#VARIANT_LIST[@]} variant(s) x ${#PYTHON_LIST[@]} interpreter(s) in $(( $(date +%s) - START )) s (jobs=$JOBS)"
exit $fail
