#!/usr/bin/env bats
# Conventions every binary follows (man7/trainkit.7): --help on stdout with exit 0, --version,
# unknown options exit 2 with usage on stderr and nothing on stdout, a man page per binary.

bats_require_minimum_version 1.5.0

bins() { for b in "$TK_BIN"/*; do [ -x "$b" ] && basename "$b"; done; }

@test "there are binaries to check" {
    [ -n "$(bins)" ]
}

@test "every binary: --help prints usage on stdout and exits 0" {
    for b in $(bins); do
        run --separate-stderr "$TK_BIN/$b" --help
        [ "$status" -eq 0 ] || { echo "$b --help exited $status"; return 1; }
        [[ "$output" == *"$b"* ]] || { echo "$b --help does not name itself"; return 1; }
        [ -z "$stderr" ] || { echo "$b --help wrote to stderr"; return 1; }
    done
}

@test "every binary: -V/--version names trainkit and exits 0" {
    for b in $(bins); do
        run "$TK_BIN/$b" --version
        [ "$status" -eq 0 ] && [[ "$output" == *"trainkit"* ]] || { echo "$b --version: $status $output"; return 1; }
        run "$TK_BIN/$b" -V
        [ "$status" -eq 0 ] || { echo "$b -V: $status"; return 1; }
    done
}

@test "every binary: an unknown option is a usage error (exit 2, stderr only)" {
    for b in $(bins); do
        run --separate-stderr "$TK_BIN/$b" --no-such-option
        [ "$status" -eq 2 ] || { echo "$b: exit $status"; return 1; }
        [ -z "$output" ] || { echo "$b wrote to stdout: $output"; return 1; }
        [[ "$stderr" == "$b: "* ]] || { echo "$b stderr: $stderr"; return 1; }
    done
}

@test "every binary has a man page" {
    for b in $(bins); do
        [ -f "$TK_ROOT/man/man1/$b.1" ] || { echo "missing man/man1/$b.1"; return 1; }
    done
}

@test "every man page renders without warnings at 80 columns" {
    command -v man >/dev/null || skip "man is not installed"
    for f in "$TK_ROOT"/man/man[157]/*.[157]; do
        run bash -c "MANWIDTH=80 man --warnings -l '$f' 2>&1 >/dev/null"
        [ -z "$output" ] || { echo "$f: $output"; return 1; }
    done
}

@test "man pages list the common exit codes" {
    for b in $(bins); do
        grep -q "EXIT STATUS" "$TK_ROOT/man/man1/$b.1" || { echo "$b.1 has no EXIT STATUS"; return 1; }
    done
    grep -q '^\.B 70' "$TK_ROOT/man/man7/trainkit.7"
}
