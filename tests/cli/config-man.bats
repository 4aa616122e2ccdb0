#!/usr/bin/env bats
# trainkit-config(5): it renders without warnings, and it names every key the shipped
# configurations use (share/workloads/*/*.json), each workload's own keys in its subsection.

PAGE="$TK_ROOT/man/man5/trainkit-config.5"

@test "trainkit-config(5): groff renders it without a warning" {
    run groff -man -ww -z "$PAGE"
    echo "$output"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}

@test "trainkit-config(5): man renders it with its sections" {
    command -v man >/dev/null || skip "man is not installed"
    run env MANWIDTH=100 man -l "$PAGE"
    [ "$status" -eq 0 ]
    for s in NAME DESCRIPTION ERRORS TRAIN TARGET OPTIMIZER WORKLOADS OVERRIDES "CONFIG HASH" "SEE ALSO"; do
        grep -qx "$s" <<<"$output" || { echo "no section $s"; false; }
    done
}

# The page's text from ".SS NAME" to the next .SS or .SH.
subsection() {
    awk -v n="$1" '/^\.S[SH] / { on = ($1 == ".SS" && $2 == n) ; next } on' "$PAGE"
}

# Every object key of a JSON file as a dotted path (array elements are not keys).
keys() {
    jq -r 'paths | select(all(.[]; type == "string")) | join(".")' "$1"
}

@test "trainkit-config(5) names every key of share/workloads/*/*.json" {
    command -v jq >/dev/null || skip "jq is not installed"
    local engine='^(workload|name|description|synthetic|train|target|optimizer)(\.|$)'
    local missing=0 n=0 f wl k
    for f in "$TK_ROOT"/share/workloads/*/*.json; do
        wl=$(jq -r .workload "$f")
        [ -n "$(subsection "$wl")" ] || { echo "no .SS $wl for $f"; missing=1; continue; }
        while read -r k; do
            n=$((n + 1))
            if [[ "$k" =~ $engine ]]; then
                # the engine's sections and the notes: anywhere on the page
                grep -qwF -- "$k" "$PAGE" || { echo "${f#"$TK_ROOT"/}: $k is not named"; missing=1; }
            else
                # the workload's own sections: in its subsection
                subsection "$wl" | grep -qwF -- "$k" ||
                    { echo "${f#"$TK_ROOT"/}: $k is not named under .SS $wl"; missing=1; }
            fi
        done < <(keys "$f")
    done
    echo "$n keys checked"
    [ "$n" -gt 100 ]
    [ "$missing" -eq 0 ]
}

# The keys a parser accepts, as dotted paths: the string lists "static const char *const
# SECTION_keys[] = {...}" (par_keys: "parallel") of the files given, and the engine's
# "train[] = {...}".
parser_keys() {
    awk '/(_keys|const train)\[\] = \{/ {
            s = $0; sub(/(_keys)?\[\].*/, "", s); sub(/.*[ *]/, "", s); if (s == "par") s = "parallel"
            on = 1; $0 = substr($0, index($0, "{"))
         }
         on { while (match($0, /"[a-z_0-9]+"/)) { print s "." substr($0, RSTART + 1, RLENGTH - 2); $0 = substr($0, RSTART + RLENGTH) } }
         /NULL\}/ { on = 0 }' "$@"
}

@test "trainkit-config(5) names every key the parsers accept" {
    local missing=0 d wl k keys
    for d in "$TK_ROOT"/lib/workloads/*/; do
        wl=$(basename "$d")
        keys=$(parser_keys "$d"*.c)
        [ -n "$keys" ] || { echo "no key lists found in lib/workloads/$wl"; missing=1; }
        for k in $keys; do
            subsection "$wl" | grep -qwF -- "$k" || { echo "lib/workloads/$wl: $k is not named under .SS $wl"; missing=1; }
        done
    done
    keys="$(parser_keys "$TK_ROOT/lib/engine/config.c") $(sed -n 's/^ *{"\([a-z_0-9]*\)", O_.*/optimizer.\1/p' \
        "$TK_ROOT/lib/engine/optim_config.c")"
    [[ "$keys" == *train.seed*optimizer.base_lr* ]] || { echo "the engine's key lists were not found"; missing=1; }
    for k in $keys; do
        grep -qwF -- "$k" "$PAGE" || { echo "lib/engine: $k is not named"; missing=1; }
    done
    [ "$missing" -eq 0 ]
}
