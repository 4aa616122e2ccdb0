#!/usr/bin/env bats
# The JPEG fixtures' references (tests/data/image/*.ppm, used by tests/unit/test_image.c) are
# Pillow's: the installed Pillow decodes and resizes the fixtures to the same bytes.

@test "tests/data/image references are what the installed Pillow produces" {
    command -v python3 >/dev/null && python3 -c 'import PIL' 2>/dev/null || skip "Pillow is not installed (contrib/setup-deps.sh)"
    run python3 "$TK_ROOT/tests/data/image/make_fixtures.py" "$TK_ROOT/tests/data/image" --check
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}

@test "the fixture generator rewrites the same JPEGs" {
    command -v python3 >/dev/null && python3 -c 'import PIL' 2>/dev/null || skip "Pillow is not installed (contrib/setup-deps.sh)"
    python3 "$TK_ROOT/tests/data/image/make_fixtures.py" "$BATS_TEST_TMPDIR/fx"
    n=0
    for f in "$TK_ROOT"/tests/data/image/*.jpg; do
        cmp "$f" "$BATS_TEST_TMPDIR/fx/$(basename "$f")" || n=$((n + 1))
    done
    # Pillow's bundled libjpeg-turbo may encode differently in another version: then the decode
    # check above is what matters; say so rather than fail
    [ "$n" -eq 0 ] || skip "$n fixture JPEGs encode differently with this Pillow (decodes checked above)"
}
