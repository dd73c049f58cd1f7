#!/bin/sh
# The /clear hook as the spike wrote it, with ps, jq and curl: the yardstick
# for bee-hook's benchmark. Not used by bee.
input=$(cat)
[ "$(printf '%s' "$input" | jq -r .source)" = clear ] || exit 0
pid=$PPID
while [ "$pid" -gt 1 ]; do
  [ "$(ps -o comm= -p "$pid")" = claude ] && break
  pid=$(ps -o ppid= -p "$pid" | tr -d ' ')
done
f="${BEE_RUN_DIR:-$HOME/.bee/run}/$pid.json"
[ -f "$f" ] || { echo "no run file for claude pid $pid" >&2; exit 0; }
port=$(jq -r .port "$f")
token=$(jq -r .token "$f")
bpid=$(jq -r .pid "$f")
kill -0 "$bpid" 2>/dev/null || { echo "stale run file for dead bridge $bpid" >&2; exit 0; }
body=$(printf '%s' "$input" | jq -c '{session_id, transcript_path}')
printf 'header = "Authorization: Bearer %s"\n' "$token" |
  curl -sS -K - -X POST -H 'Content-Type: application/json' --data "$body" "http://127.0.0.1:$port/retire" >&2
