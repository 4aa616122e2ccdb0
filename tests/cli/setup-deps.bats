#!/usr/bin/env bats
# contrib/setup-deps.sh raises its own privileges: as root it runs apt-get itself (no sudo needed,
# none installed), as a user through sudo, and a user without sudo gets a clear error. With
# stand-ins for id, dpkg, apt-get and sudo on a PATH of nothing else (the real ones are never run).

setup() {
    B=$BATS_TEST_TMPDIR/bin
    LOG=$BATS_TEST_TMPDIR/log
    mkdir -p "$B"
    for t in env cat; do ln -s "$(command -v "$t")" "$B/$t"; done
    # id -u: FAKE_UID; dpkg -s: installed unless named in FAKE_MISSING
    printf '#!%s\n[ "$1" = -u ] && echo "$FAKE_UID"\n' "$BASH" >"$B/id"
    printf '#!%s\ncase " $FAKE_MISSING " in *" $2 "*) exit 1 ;; esac\n' "$BASH" >"$B/dpkg"
    printf '#!%s\necho "apt-get $* (DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-unset})" >>"%s"\n' "$BASH" "$LOG" >"$B/apt-get"
    chmod +x "$B/id" "$B/dpkg" "$B/apt-get"
    export TK_SKIP_PY=1
}

# sudo as Debian's: the command with a reset environment (PATH kept for the stand-ins)
add_sudo() {
    printf '#!%s\necho "sudo $1" >>"%s"\nexec env -i PATH="$PATH" "$@"\n' "$BASH" "$LOG" >"$B/sudo"
    chmod +x "$B/sudo"
}

@test "setup-deps: nothing missing: nothing to install, as a user without sudo too" {
    FAKE_UID=1000 FAKE_MISSING= PATH=$B run "$BASH" "$TK_ROOT/contrib/setup-deps.sh"
    [ "$status" -eq 0 ]
    [ ! -e "$LOG" ]
}

@test "setup-deps: as root with no sudo installed, apt-get runs itself" {
    FAKE_UID=0 FAKE_MISSING="bats jq" PATH=$B run "$BASH" "$TK_ROOT/contrib/setup-deps.sh"
    [ "$status" -eq 0 ]
    run cat "$LOG"
    [ "${lines[0]}" = "apt-get update -qq (DEBIAN_FRONTEND=noninteractive)" ]
    [ "${lines[1]}" = "apt-get install -y -qq bats jq (DEBIAN_FRONTEND=noninteractive)" ]
    [ "${#lines[@]}" -eq 2 ]
}

@test "setup-deps: as a user, apt-get through sudo, non-interactive all the same" {
    add_sudo
    FAKE_UID=1000 FAKE_MISSING=jq PATH=$B run "$BASH" "$TK_ROOT/contrib/setup-deps.sh"
    [ "$status" -eq 0 ]
    run cat "$LOG"
    [ "${lines[0]}" = "sudo env" ]
    [ "${lines[1]}" = "apt-get update -qq (DEBIAN_FRONTEND=noninteractive)" ]
    [ "${lines[2]}" = "sudo env" ]
    [ "${lines[3]}" = "apt-get install -y -qq jq (DEBIAN_FRONTEND=noninteractive)" ]
    [ "${#lines[@]}" -eq 4 ]
}

@test "setup-deps: a user without sudo: exit 4 naming what is missing, nothing run" {
    FAKE_UID=1000 FAKE_MISSING="zstd" PATH=$B run "$BASH" "$TK_ROOT/contrib/setup-deps.sh"
    [ "$status" -eq 4 ]
    [ "$output" = "setup-deps.sh: error: the Debian packages zstd are missing, and installing them needs root: run this as root, or as a user with sudo" ]
    [ ! -e "$LOG" ]
}
