#!/usr/bin/env bash
# Hunts intermittent test failures: runs the same stages of scripts/test.sh
# several times in a row on a busy machine, and says what failed in which
# rounds. CI must never be red by chance; a test that fails in 1 round of 5
# is a flake to fix at its cause (a timing the test asserts, or a race in the
# product), never with a retry or a longer timeout.
#
#   bash scripts/flake-hunt.sh [--rounds N] [--stages a,b,...] [--load N] [--ref REF]
#
#   --rounds N     rounds of test.sh (default 5)
#   --stages a,b   passed to test.sh --only (default workerd,client,cli,browser,verify;
#                  bash scripts/test.sh --list names them all)
#   --load N       CPU hogs running during the rounds (default: one per core;
#                  0 for none): busy loops at nice 0, the tests' own priority
#   --ref REF      the commit to test (default HEAD): only what is committed is
#                  tested, in a clean clone, never the work tree's edits
#
# What it does: clones this repository at REF into a new folder under
# ${TMPDIR:-/tmp} (flake-hunt.XXXXXX/clone), bootstraps and builds there once
# before the load starts (so round 1 is not a build), starts the hogs, runs
# `bash scripts/test.sh --only STAGES` ROUNDS times, and kills the hogs (by
# their ids) on exit, on Ctrl-C and on TERM, with the round running at the
# time (test.sh runs in a session of its own, ended as a group).
#
# What it keeps, per round, in flake-hunt.XXXXXX/rounds/N/: output.log (all
# of test.sh's output), the vitest JSON reports (vitest-*.json) and the other
# logs test.sh wrote in build/ (verify, consumer, ...), and result (exit code,
# seconds, totals).
#
# How to read its output: the table at the end has one line per round (its
# "N passed, N failed" totals, its exit code and how long it took; "no totals"
# means test.sh died before its last line), then every test that failed in any
# round with the number of rounds it failed in, out of the rounds run, and the
# first line of its first error. A test failing in every round is most likely
# plainly broken at REF (check one run without load); one failing in some
# rounds only is intermittent. Names come from the vitest reports (file >
# test) and, for the scripted suites, from test.sh's "what failed" lines
# (numbers in those lines are written as # so that one check counts as one
# line whatever it measured). Exits 0 only if every round passed.
set -uo pipefail

rounds=5
stages=workerd,client,cli,browser,verify
load=$(nproc 2>/dev/null || echo 2)
ref=HEAD
usage() { sed -n '9,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:-}; shift 2 ;;
    --stages) stages=${2:-}; shift 2 ;;
    --load) load=${2:-}; shift 2 ;;
    --ref) ref=${2:-}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "flake-hunt: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "flake-hunt: --rounds needs a positive number" >&2; exit 2; }
[[ "$load" =~ ^[0-9]+$ ]] || { echo "flake-hunt: --load needs a number" >&2; exit 2; }
[ -n "$stages" ] || { echo "flake-hunt: --stages needs stage names" >&2; exit 2; }

src=$(cd "$(dirname "$0")/.." && pwd)
sha=$(git -C "$src" rev-parse --verify --quiet "$ref^{commit}") || { echo "flake-hunt: no commit '$ref'" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/flake-hunt.XXXXXX")
clone=$work/clone
echo "flake-hunt: $rounds rounds of test.sh --only $stages at ${sha:0:12}, $load CPU hogs; everything in $work"

# The table: per round, then every test that failed in any round; fails
# if anything did.
report() {
  [ -d "$work/rounds" ] || { echo "(no round ended)"; return 1; }
  node - "$work/rounds" "$rounds" <<'EOF'
const fs = require("fs");
const path = require("path");
const [root, total] = [process.argv[2], Number(process.argv[3])];
const first = (m) => String(m ?? "").split("\n").find((l) => l.trim()) ?? "";
const failures = new Map(); // name -> { rounds: Set, error }
const note = (name, round, error) => {
  const f = failures.get(name) ?? { rounds: new Set(), error };
  f.rounds.add(round);
  failures.set(name, f);
};
const lines = [];
let bad = 0;
for (let r = 1; r <= total; r++) {
  const dir = path.join(root, String(r));
  if (!fs.existsSync(path.join(dir, "result"))) continue;
  const result = Object.fromEntries(
    fs.readFileSync(path.join(dir, "result"), "utf8").trim().split("\n").map((l) => l.split(/=(.*)/s).slice(0, 2)),
  );
  if (result.code !== "0") bad++;
  const m = result.totals.match(/^(\d+) passed, (\d+) failed$/);
  lines.push([r, m ? m[1] : "-", m ? m[2] : "no totals", result.code, `${result.seconds}s`]);
  // vitest: each failed test by file and full name; a file failed as a whole by file
  const fromReports = new Set();
  for (const report of fs.readdirSync(dir).filter((f) => /^vitest-.*\.json$/.test(f))) {
    fromReports.add(`build/${report}`);
    let json;
    try { json = JSON.parse(fs.readFileSync(path.join(dir, report), "utf8")); }
    catch { note(`${report}: unreadable report`, r, ""); continue; }
    for (const file of json.testResults ?? []) {
      const rel = file.name.replace(/^.*?\/clone\//, "");
      const failed = (file.assertionResults ?? []).filter((a) => a.status === "failed");
      for (const a of failed) note(`${rel} > ${a.fullName}`, r, first(a.failureMessages?.[0]));
      if (!failed.length && file.status === "failed") note(`${rel} (the whole file)`, r, first(file.message));
    }
  }
  // everything else test.sh named in its "what failed" lines
  const out = fs.readFileSync(path.join(dir, "output.log"), "utf8").split("\n");
  const at = out.lastIndexOf("== what failed");
  if (at >= 0) {
    for (const line of out.slice(at + 1)) {
      if (!line.startsWith("  ")) break;
      const text = line.trim();
      const source = text.split(":")[0];
      if (fromReports.has(source) && !/exited \d+ with no failed test|no report/.test(text)) continue;
      note(text.replace(/\d+(\.\d+)?/g, "#"), r, text);
    }
  } else if (!/^\d+ passed/.test(result.totals)) {
    note("test.sh ended with no totals line", r, out.filter((l) => l.trim()).slice(-1)[0] ?? "");
  }
}
const pad = (row, widths) => row.map((c, i) => String(c).padEnd(widths[i])).join("  ").trimEnd();
const head = ["round", "passed", "failed", "exit", "time"];
const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => String(l[i]).length)));
console.log("\n== flake-hunt: rounds");
console.log(pad(head, widths));
for (const l of lines) console.log(pad(l, widths));
console.log(`\n== flake-hunt: ${failures.size ? "what failed (rounds failed / rounds run, the rounds, the first error)" : "nothing failed in any round"}`);
const sorted = [...failures].sort((a, b) => b[1].rounds.size - a[1].rounds.size || a[0].localeCompare(b[0]));
for (const [name, f] of sorted) {
  console.log(`${f.rounds.size}/${lines.length}  ${name}  (rounds ${[...f.rounds].join(",")})`);
  if (f.error) console.log(`      ${f.error.slice(0, 300)}`);
}
process.exitCode = bad || failures.size ? 1 : 0;
EOF
}

hogs=()
round_pid=""
stop_hogs() {
  local pid
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null; done
  hogs=()
}
cleanup() {
  # the running round: test.sh leads a session of its own (setsid), so its
  # workerd, vitest and chromium processes go with it
  if [ -n "$round_pid" ]; then
    kill -TERM -- "-$round_pid" 2>/dev/null
    sleep 2
    kill -KILL -- "-$round_pid" 2>/dev/null
    round_pid=""
  fi
  stop_hogs
}
interrupted() {
  trap - INT TERM
  cleanup
  echo
  echo "flake-hunt: interrupted; the rounds that ended:"
  report
  echo "flake-hunt: results so far in $work/rounds"
  exit "$1"
}
trap cleanup EXIT
trap 'interrupted 130' INT
trap 'interrupted 143' TERM

git clone -q --no-checkout "$src" "$clone" || exit 1
git -C "$clone" checkout -q --detach "$sha" || exit 1

# The one-off setup, before the load: bootstrap, and the build test.sh would
# do (the native engine only for the stages that run it), so that every round
# times the tests themselves and round 1 is not a build.
echo "flake-hunt: bootstrap and build in $clone (log: $work/setup.log)"
(
  cd "$clone" || exit 1
  bash scripts/bootstrap.sh || exit 1
  if [[ ",$stages," =~ ,(engine|node), ]]; then bash scripts/build.sh; else bash scripts/build-package.sh; fi
) >"$work/setup.log" 2>&1 || { tail -30 "$work/setup.log"; echo "flake-hunt: setup failed (see $work/setup.log)"; exit 1; }

for ((i = 0; i < load; i++)); do
  nice -n 0 bash -c 'while :; do :; done' &
  hogs+=($!)
done
[ "$load" -eq 0 ] || echo "flake-hunt: CPU hogs running: ${hogs[*]}"

for ((r = 1; r <= rounds; r++)); do
  dir=$work/rounds/$r
  mkdir -p "$dir"
  echo "== round $r of $rounds (output: $dir/output.log)"
  rm -f "$clone"/build/vitest-*.json
  start=$(date +%s)
  # setsid: test.sh and all it starts form one process group, killed whole
  # if the hunt is interrupted; `wait` lets the traps run at once.
  (cd "$clone" && exec setsid bash scripts/test.sh --only "$stages") </dev/null >"$dir/output.log" 2>&1 &
  round_pid=$!
  wait "$round_pid"
  code=$?
  round_pid=""
  secs=$(($(date +%s) - start))
  cp "$clone"/build/vitest-*.json "$dir"/ 2>/dev/null
  for log in "$clone"/build/*.log; do [ -f "$log" ] && cp "$log" "$dir"/; done
  totals=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$dir/output.log" | tail -1)
  printf 'code=%s\nseconds=%s\ntotals=%s\n' "$code" "$secs" "$totals" >"$dir/result"
  echo "   ${totals:-no totals}, exit $code, ${secs}s"
  sed -n '/^== what failed$/,$p' "$dir/output.log" | sed '1d;$d' | sed 's/^/   /'
done
stop_hogs

report
status=$?
echo "flake-hunt: results in $work/rounds (the clone, $clone, can be removed)"
exit "$status"
