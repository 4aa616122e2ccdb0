#!/usr/bin/env bats
# The layers of DESIGN.md 3a, checked on the sources (contrib/tools/layout.py layers): every
# #include "..." of lib/, kernels/ and cmd/ points down (core -> dist -> gpu -> kernels -> blocks,
# the data libraries, engine -> workloads -> cmd), no workload includes another's headers, and the
# op dispatchers live in kernels/. Then the same check on a copy of the tree with one arrow
# planted, so a back-arrow fails `make check` with the file, the line and the two layers.

setup() {
    cd "$BATS_TEST_TMPDIR"
}

# A copy of the sources the check reads, and its copy of the tool.
copy_tree() {
    mkdir -p t/contrib/tools
    cp -R "$TK_ROOT/lib" "$TK_ROOT/kernels" "$TK_ROOT/cmd" t/
    cp "$TK_ROOT/contrib/tools/layout.py" t/contrib/tools/
}

# plant FILE LINE: appends the include line to t/FILE; prints the line number it got.
plant() {
    printf '%s\n' "$2" >>"t/$1"
    wc -l <"t/$1" | tr -d ' '
}

# one_arrow FILE INCLUDE WHY: in a fresh copy, FILE gets the include line; the check must fail
# with exactly one line naming FILE, its new line, INCLUDE and WHY.
one_arrow() {
    copy_tree
    n=$(plant "$1" "#include \"$2\"")
    run python3 t/contrib/tools/layout.py layers
    [ "$status" -eq 1 ]
    [ "$output" = "$1:$n includes $2 ($3)" ]
}

@test "layout: every include of lib/, kernels/ and cmd/ points down the layers" {
    run python3 "$TK_ROOT/contrib/tools/layout.py" layers
    [ "$output" = "" ]
    [ "$status" -eq 0 ]
}

@test "layout: the copy without a plant passes (what the cases below change is all they find)" {
    copy_tree
    run python3 t/contrib/tools/layout.py layers
    [ "$output" = "" ]
    [ "$status" -eq 0 ]
}

@test "layout: lib/gpu including the engine fails, naming the file, the line and both layers" {
    one_arrow lib/gpu/ctx.c engine/engine.h "layer gpu -> higher layer engine"
}

@test "layout: lib/gpu including a kernels/ header (found through -Ikernels) fails, .cu files too" {
    one_arrow lib/gpu/gemm_cublaslt.cu activation.h "layer gpu -> higher layer kernels"
}

@test "layout: the old two-way tie, kernels/img_resize.h including lib/image, fails" {
    one_arrow kernels/img_resize.h image/transform.h "layer kernels -> higher layer image"
}

@test "layout: a data library including a sibling it does not sit on fails" {
    copy_tree
    n=$(plant lib/bert/corpus.c '#include "criteo/criteo.h"')
    m=$(plant lib/criteo/synth.c '#include "gpu/gpu.h"')
    run python3 t/contrib/tools/layout.py layers
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "lib/bert/corpus.c:$n includes criteo/criteo.h (layer bert -> layer criteo, not below it)" ]
    [ "${lines[1]}" = "lib/criteo/synth.c:$m includes gpu/gpu.h (layer criteo -> layer gpu, not below it)" ]
    [ "${#lines[@]}" -eq 2 ]
}

@test "layout: a workload including another workload's header fails" {
    one_arrow lib/workloads/dlrm/model.c workloads/resnet/resnet.h "workload dlrm -> another workload resnet"
}

@test "layout: an op dispatcher outside kernels/ fails" {
    one_arrow lib/workloads/bert/step.c dispatch.h "op dispatchers live in kernels/NAME.c"
}

@test "layout: a new directory of lib/ must be given a layer" {
    copy_tree
    mkdir t/lib/newthing
    printf '#include "core/err.h"\n' >t/lib/newthing/x.c
    run python3 t/contrib/tools/layout.py layers
    [ "$status" -eq 1 ]
    [ "$output" = "lib/newthing/x.c: in no layer (add its directory to LAYERS in contrib/tools/layout.py)" ]
}

@test "layout: the table lists the layers lowest first" {
    run python3 "$TK_ROOT/contrib/tools/layout.py" table
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "core "*"lib/core "*"may include: (nothing)" ]]
    [[ "${lines[2]}" == "gpu "*"lib/gpu "*"may include: core, dist" ]]
    [[ "${lines[-1]}" == "cmd "*"may include: "*", engine, workloads" ]]
}
