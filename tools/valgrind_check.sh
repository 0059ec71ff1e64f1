#!/usr/bin/env bash
# Run dynamo_lite's C extension under valgrind memcheck on a small workload
# (tools/valgrind_workload.py) and summarise the report.
#
#   tools/valgrind_check.sh [LOG]        (default LOG: /tmp/dl_valgrind.log)
#
# The extension is rebuilt with -g -O1 in a scratch copy of the repository (the
# working tree is not touched); python runs with PYTHONMALLOC=malloc so that
# every Python allocation is visible to memcheck.  Torch and CPython produce
# their own (known, harmless) reports; the summary separates the errors and
# definite leaks whose stack goes through dynamo_lite's extension
# (eval_frame.c, cache_entry.c, call_scope.c, guards.c, tensor_meta.cpp) from the rest.  Exit status 1 when
# the workload fails or any error/definite leak involves our code.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG="${1:-/tmp/dl_valgrind.log}"
PY="${PYTHON:-python}"
PY="$("$PY" -c 'import sys; print(sys.executable)')"  # the real binary, not a pyenv/venv shim script
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)"; exit 2; }

SCRATCH="$(mktemp -d /tmp/dl_valgrind_build.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT
cp -r "$ROOT/csrc" "$ROOT/dynamo_lite" "$ROOT/setup.py" "$ROOT/pyproject.toml" "$ROOT/tools" "$SCRATCH/"
rm -f "$SCRATCH"/dynamo_lite/*.so
(cd "$SCRATCH" && CFLAGS="-g -O1 -fno-omit-frame-pointer" "$PY" setup.py -q build_ext --inplace >/dev/null 2>&1)
ls "$SCRATCH"/dynamo_lite/_C*.so >/dev/null

echo "running the workload under valgrind (several minutes: torch is large) ..."
set +e
(cd "$SCRATCH" && PYTHONMALLOC=malloc PYTHONPATH="$SCRATCH" valgrind --tool=memcheck \
    --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
    --num-callers=40 --track-origins=no --log-file="$LOG" \
    "$PY" tools/valgrind_workload.py > "$LOG.stdout" 2>&1)
STATUS=$?
set -e

"$PY" - "$LOG" "$LOG.stdout" "$STATUS" <<'PYEOF'
import re, sys
log, out, status = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(log).read()
ours = re.compile(r"(eval_frame\.c|cache_entry\.c|call_scope\.c|guards\.c|tensor_meta\.cpp|dynamo_lite/_C|dynamo_lite/_tensor_meta)")
blocks, cur = [], []
for line in text.splitlines():
    body = re.sub(r"^==\d+== ?", "", line)
    if not body.strip():
        if cur:
            blocks.append(cur)
        cur = []
    else:
        cur.append(body)
if cur:
    blocks.append(cur)
kinds = {}
our_blocks = []
for b in blocks:
    head = b[0]
    if not (head.startswith(("Invalid", "Conditional", "Use of uninit", "Syscall param", "Mismatched", "Source and destination"))
            or "definitely lost" in head):
        continue
    key = "definite leak" if "definitely lost" in head else re.sub(r" of size \d+", "", head)
    frames = [l for l in b if l.strip().startswith(("at ", "by "))]
    # an error is ours when it happens in our code (one of its innermost frames); a leak,
    # when our code allocated the block (anywhere on its stack).  An error deeper down
    # (e.g. a GC pass that an allocation of ours triggered) is counted apart.
    mine = any(ours.search(l) for l in (frames if key == "definite leak" else frames[:4]))
    if not mine and any(ours.search(l) for l in frames):
        key += " (our frame deeper on the stack)"
    kinds.setdefault(key, [0, 0])[mine] += 1
    if mine:
        our_blocks.append(b)
summary = re.findall(r"ERROR SUMMARY: .*", text)
leaks = re.findall(r"(definitely lost|indirectly lost|possibly lost|still reachable): .*", text)
workload = open(out).read()
print("=== valgrind memcheck summary ===")
print("workload:", "ok" if "workload ok" in workload and status == 0 else f"FAILED (exit {status})")
ext = re.findall(r"extension: (.*)", workload)
print("extension under test:", ext[0] if ext else "?", "(debug build in the scratch copy)")
print(summary[-1] if summary else "no ERROR SUMMARY line (did valgrind run?)")
for l in re.findall(r"(?:definitely|indirectly|possibly) lost: .*|still reachable: .*", text)[-4:]:
    print("  " + l)
print(f"{'kind':45s} {'not ours':>9s} {'ours':>6s}")
for k, (other, mine) in sorted(kinds.items()):
    print(f"{k:45s} {other:9d} {mine:6d}")
for b in our_blocks[:5]:
    print("\n--- involves dynamo_lite ---\n" + "\n".join(b[:25]))
print(f"\nfull log: {log}")
sys.exit(1 if our_blocks or "workload ok" not in workload else 0)
PYEOF
