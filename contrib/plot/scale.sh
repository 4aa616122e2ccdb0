#!/usr/bin/env bash
# scale.sh: JSON Lines from share/scale -> PNG charts of throughput and scaling efficiency vs
# GPUs, one line per workload and batch setting (contrib/plot/scale.gp draws them).
#
#   contrib/plot/scale.sh [-o PREFIX] [-t TITLE] [FILE.jsonl ...]     (no FILE: standard input)
#
# Writes PREFIX-throughput.png, PREFIX-efficiency.png and PREFIX.dat (the gnuplot data, one
# block per series) and prints their names. PREFIX defaults to the first FILE without .jsonl
# ("scale" for standard input). Only runs with a throughput are drawn; when one GPU count of a
# series was run several times, the last line wins. Efficiency is recomputed from the points
# drawn: per-GPU throughput over that of the series' smallest GPU count, which is also where
# the ideal (linear) line starts. Needs jq and gnuplot (apt-get install jq gnuplot-nox).
# Exit status: 0 written, 2 usage, 3 bad input (not JSON, nothing to draw), 4 missing tool or
# I/O error.
set -u
prog=scale.sh
here=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
die_usage() { echo "$prog: $1" >&2; echo "Try '$prog --help' for more information." >&2; exit 2; }
die() { echo "$prog: error: $2" >&2; exit "$1"; }

prefix= title="Scaling"
while [ $# -gt 0 ]; do
    case "$1" in
    -o|--out) [ $# -ge 2 ] || die_usage "$1 needs a value"; prefix=$2; shift 2 ;;
    -t|--title) [ $# -ge 2 ] || die_usage "$1 needs a value"; title=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -?*) die_usage "unknown option '$1'" ;;
    *) break ;;
    esac
done
for f in "$@"; do [ -r "$f" ] || die 4 "$f: cannot read"; done
if [ -z "$prefix" ]; then
    if [ $# -gt 0 ]; then prefix=${1%.jsonl}; else prefix=scale; fi
fi
command -v jq >/dev/null || die 4 "jq is needed (apt-get install jq)"
command -v gnuplot >/dev/null || die 4 "gnuplot is needed (apt-get install gnuplot-nox)"

# One block per series, separated by two blank lines (gnuplot's "index"); the first line of a
# block is its title (columnheader), then: gpus samples_per_s ideal_samples_per_s efficiency.
data=$prefix.dat
jq -n -R -r '
  [inputs | select(test("\\S")) | . as $l
   | try fromjson catch ("scale.sh: error: \(input_filename // "-"): line \(input_line_number): not JSON\n" | halt_error(3))]
  | map(select(type == "object" and .type == "scale" and (.gpus | type) == "number"
               and (.samples_per_s | type) == "number" and .samples_per_s > 0))
  | map(. + {series: (if .scaling == "weak"
                      then "\(.workload), \(.batch_per_gpu) per GPU (weak)"
                      else "\(.workload), global batch \(.global_batch // "of the config") (strong)" end)})
  # Series in order of first appearance; within one, the last line per GPU count.
  | reduce .[] as $r ({order: [], by: {}};
      (if .by[$r.series] == null then .order += [$r.series] else . end)
      | .by[$r.series][$r.gpus | tostring] = $r)
  | .by as $by
  | .order[]
  | [$by[.][]] | sort_by(.gpus) | (.[0].samples_per_s / .[0].gpus) as $base
  | "\"\(.[0].series)\"",
    (.[] | "\(.gpus) \(.samples_per_s) \($base * .gpus) \(.samples_per_s / .gpus / $base)"),
    "", ""' "$@" >"$data"
rc=$?
[ "$rc" -eq 0 ] || { rm -f "$data"; [ "$rc" -eq 3 ] && exit 3; die 3 "${1:--}: not JSON Lines"; }
n=$(grep -c '^"' "$data")
[ "$n" -gt 0 ] || { rm -f "$data"; die 3 "${1:--}: no run with a throughput to draw"; }

gp_str() { local q="'"; printf "'%s'" "${1//$q/$q$q}"; }  # a gnuplot single-quoted string
gnuplot -e "datafile=$(gp_str "$data"); prefix=$(gp_str "$prefix"); nseries=$n; charttitle=$(gp_str "$title")" \
    "$here/scale.gp" || die 4 "gnuplot failed"
for f in "$prefix-throughput.png" "$prefix-efficiency.png" "$data"; do
    [ -s "$f" ] || die 4 "$f: not written"
    echo "$f"
done
