# trainkit: one Makefile for the whole tree. Files are discovered, so adding a source file needs
# no edit here: lib/**/*.c and kernels/*_ref.c go into build/libtrainkit.a, lib/**/*.cu and
# kernels/*.cu into build/libtkcuda.a (only when nvcc is present), cmd/NAME.c (with cmd/NAME/*.c,
# when the binary has parts) becomes build/bin/NAME, tests/unit/test_*.c become unit tests, tests/gpu/test_*.{c,cu} GPU tests.

CC        ?= gcc
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
SM        ?= 90
PREFIX    ?= /usr/local
BUILD     ?= build
DEBUG     ?=
SAN       ?=

HAVE_CUDA := $(shell test -x $(NVCC) && echo 1)

# libjpeg-turbo (Debian libjpeg62-turbo-dev) and libpng (libpng-dev) for the ImageNet tools, linked
# statically like zstd so binaries run where they are absent. Found when the header compiles and
# the static library exists; `make HAVE_JPEG= HAVE_PNG=` builds without them (prep imagenet and
# the image decoder then exit 2 saying so).
ifeq ($(origin HAVE_JPEG),undefined)
HAVE_JPEG := $(shell printf '\043include <stdio.h>\n\043include <jpeglib.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && \
               test -f "$$($(CC) -print-file-name=libjpeg.a)" && echo 1)
endif
ifeq ($(origin HAVE_PNG),undefined)
HAVE_PNG  := $(shell printf '\043include <png.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && \
               test -f "$$($(CC) -print-file-name=libpng16.a)" && echo 1)
endif
IMG_LIBS := $(if $(HAVE_JPEG),-ljpeg) $(if $(HAVE_PNG),-lpng16)

OPT      := $(if $(DEBUG),-O0 -g,-O2 -g)
CFLAGS   += -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -fopenmp -Ilib -Ikernels -Icmd -MMD -MP
# zstd and jansson are linked statically so binaries built here run on machines without them
# (the GPU machines have no jansson).
LDLIBS   += -Wl,-Bstatic $(IMG_LIBS) -lzstd -ljansson -Wl,-Bdynamic -lz -lm -lpthread
CFLAGS   += $(if $(HAVE_JPEG),-DTK_HAVE_JPEG) $(if $(HAVE_PNG),-DTK_HAVE_PNG)
LDFLAGS  += -fopenmp
# libhdf5 (Debian: libhdf5-dev) for `prep bert-hdf5`, found with pkg-config; linked statically
# (with its libsz/libaec) when the archives are there, so prep runs where libhdf5 is not
# installed. Without it everything builds and `prep bert-hdf5` exits 2 saying so.
HAVE_HDF5   := $(shell pkg-config --exists hdf5 2>/dev/null && echo 1)
ifeq ($(HAVE_HDF5),1)
HDF5_CFLAGS := -DTK_HAVE_HDF5 $(shell pkg-config --cflags hdf5)
HDF5_LIBDIR := $(patsubst -L%,%,$(filter -L%,$(shell pkg-config --libs-only-L hdf5)))
CFLAGS      += $(HDF5_CFLAGS)
HDF5_STATIC := -L$(HDF5_LIBDIR) -Wl,-Bstatic -lhdf5 -lsz -laec -Wl,-Bdynamic
LDLIBS      += $(if $(wildcard $(HDF5_LIBDIR)/libhdf5.a),$(HDF5_STATIC),$(shell pkg-config --libs hdf5)) -lz -lm -ldl
endif
# libFLAC (Debian: libflac-dev) for `prep librispeech`, found with pkg-config; linked statically
# (with libogg) when the archives are there, as libhdf5. Without it everything builds and
# `prep librispeech` exits 2 naming the package.
HAVE_FLAC   := $(shell pkg-config --exists flac 2>/dev/null && echo 1)
ifeq ($(HAVE_FLAC),1)
FLAC_CFLAGS := -DTK_HAVE_FLAC $(shell pkg-config --cflags flac)
FLAC_A      := $(shell $(CC) -print-file-name=libFLAC.a)
OGG_A       := $(shell $(CC) -print-file-name=libogg.a)
CFLAGS      += $(FLAC_CFLAGS)
FLAC_STATIC := -Wl,-Bstatic -lFLAC -logg -Wl,-Bdynamic
LDLIBS      += $(if $(and $(wildcard $(FLAC_A)),$(wildcard $(OGG_A))),$(FLAC_STATIC),$(shell pkg-config --libs flac)) -lm
endif
ifneq ($(SAN),)
# -fno-sanitize-recover: a UBSan finding ends the program (a failed test), not just a message.
CFLAGS   += -fsanitize=$(SAN) -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS  += -fsanitize=$(SAN)
endif

ifeq ($(HAVE_CUDA),1)
CFLAGS    += -DTK_HAVE_CUDA -I$(CUDA_HOME)/include
NVCCFLAGS += -std=c++17 $(if $(DEBUG),-O0 -g -G,-O3 -lineinfo) -DTK_HAVE_CUDA -Ilib -Ikernels \
             -gencode arch=compute_$(SM),code=sm_$(SM) -Xcompiler -Wall,-fopenmp \
             --expt-relaxed-constexpr -MMD -MP
CUDA_LIBDIRS := -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -Wl,-rpath,$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib
# cuFFT: the STFT of RNN-T's features (kernels/melfeat.cu).
CUDA_LIBS := $(CUDA_LIBDIRS) -Wl,--as-needed -lcublasLt -lcublas -lcufft -lnccl -lcudart_static -ldl -lrt -lstdc++ -Wl,--no-as-needed
# cuDNN 9 (ResNet's convolutions, lib/gpu/cudnn_conv.cu): found by its header (CUDNN_HOME, default
# the toolkit's). The library is not linked but opened at run time (dlopen "libcudnn.so.9"), so the
# binaries start, and DLRM trains, on machines without it; a ResNet run on cuda then says what is
# missing. Without the header the convolutions report "built without cuDNN".
CUDNN_HOME ?= $(CUDA_HOME)
HAVE_CUDNN := $(shell test -f $(CUDNN_HOME)/include/cudnn_backend.h && echo 1)
ifeq ($(HAVE_CUDNN),1)
CFLAGS    += -DTK_HAVE_CUDNN
NVCCFLAGS += -DTK_HAVE_CUDNN -I$(CUDNN_HOME)/include
endif
# nvJPEG (the GPU image decoder, lib/image/nvjpeg.c): its header from the toolkit, else from the
# nvidia-nvjpeg wheel (python3's site-packages: nvidia/cu13/include, or nvidia/nvjpeg/include for
# CUDA 12's). Named by path (-DTK_NVJPEG_H), not put on the include path: the wheel's folder holds
# CUDA runtime headers of another version. libnvjpeg is opened at run time (dlopen), so nothing
# is linked; without the header the decoder says "built without the nvJPEG headers". NVJPEG_H=
# builds without it.
ifeq ($(origin NVJPEG_H),undefined)
NVJPEG_H := $(firstword $(wildcard $(CUDA_HOME)/include/nvjpeg.h) \
              $(shell python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "include", "nvjpeg.h") \
                for p in nvidia.__path__ for s in ("cu13", "nvjpeg") if os.path.exists(os.path.join(p, s, "include", "nvjpeg.h"))))' 2>/dev/null))
endif
ifneq ($(NVJPEG_H),)
CFLAGS    += -DTK_HAVE_NVJPEG -DTK_NVJPEG_H='"$(NVJPEG_H)"'
endif
endif

LIB_SRC  := $(sort $(shell find lib -name '*.c') $(wildcard kernels/*.c))
CU_SRC   := $(sort $(shell find lib -name '*.cu') $(wildcard kernels/*.cu))
CMD_SRC  := $(sort $(wildcard cmd/*.c))
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
GPU_SRC  := $(sort $(wildcard tests/gpu/test_*.c tests/gpu/test_*.cu tests/gpu/multi/test_*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CU_OBJ   := $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
BINS     := $(CMD_SRC:cmd/%.c=$(BUILD)/bin/%)
UNITS    := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
FUZZ_REPLAY := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/tests/fuzz/%-replay)
GPUS     := $(patsubst tests/gpu/%,$(BUILD)/tests/gpu/%,$(basename $(GPU_SRC)))

LIBTK    := $(BUILD)/libtrainkit.a
ifeq ($(HAVE_CUDA),1)
LIBCU    := $(BUILD)/libtkcuda.a
endif
ALL_LIBS := $(LIBTK) $(LIBCU) $(LIBTK)
LINK     = $(CC) $(LDFLAGS) -o $@ $^ $(ALL_LIBS) $(LDLIBS) $(CUDA_LIBS)

.PHONY: trace-preload all check check-gpu bench install clean unit-tests gpu-tests fuzz san-replay
.DELETE_ON_ERROR:
.SECONDARY:

# With nvcc the device tests are built too (CI compiles them; only `make check-gpu` runs them).
all: $(BINS) unit-tests $(FUZZ_REPLAY) $(if $(HAVE_CUDA),$(GPUS))

unit-tests: $(UNITS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c -o $@ $<

$(LIBTK): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBCU): $(CU_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# A binary is cmd/NAME.c and, when it has several parts, cmd/NAME/*.c (prep's dataset commands).
.SECONDEXPANSION:
$(BUILD)/bin/%: $(BUILD)/obj/cmd/%.o $$(addprefix $(BUILD)/obj/,$$(subst .c,.o,$$(wildcard cmd/$$*/*.c))) $(LIBTK) $(LIBCU)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LIBS) $(LDLIBS) $(CUDA_LIBS)

$(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(LIBTK) $(LIBCU)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS) $(CUDA_LIBS)

# Fuzz targets (LLVMFuzzerTestOneInput) linked with a small driver that replays a corpus, so
# `make check` runs the saved corpus without clang's libFuzzer; `make fuzz` builds real fuzzers.
$(BUILD)/tests/fuzz/%-replay: $(BUILD)/obj/tests/fuzz/%.o $(BUILD)/obj/tests/fuzz/replay_main.o $(LIBTK) $(LIBCU)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LIBS) $(LDLIBS) $(CUDA_LIBS)

$(BUILD)/obj/tests/fuzz/replay_main.o: tests/fuzz/replay_main.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The replays once more under AddressSanitizer and UBSan, CPU only, in $(BUILD)/san: `make check`
# runs every saved input through them, so an input that overflows a buffer or reaches undefined
# behaviour fails it. -O1 keeps the extra compile short (CI has 2 cores).
SAN_REPLAY := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/san/tests/fuzz/%-replay)
san-replay:
	+$(MAKE) BUILD=$(BUILD)/san SAN=address,undefined HAVE_CUDA= OPT='-O1 -g1' $(SAN_REPLAY)
	@touch $(SAN_REPLAY) # current now, even where only the plain replays were relinked (a .cu edit)

# libFuzzer binaries (clang): build/fuzz/fuzz_NAME, each target linked with the library built once
# more with ASan+UBSan and coverage (build/fuzz/obj). OpenMP is left out (its pragmas run serially,
# omp_* calls come from libgomp), and jansson, zstd, libjpeg, libpng and libhdf5 are static as in
# the normal build, so the binaries need only libc, libm, libz, libgomp and libstdc++ and run on a
# machine without clang (tests/fuzz/run-all.sh, tests/fuzz/README).
FUZZ_CC     ?= clang
FUZZ_DIR    := $(BUILD)/fuzz
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
               -fno-omit-frame-pointer -Ilib -Ikernels $(HDF5_CFLAGS) $(FLAC_CFLAGS) $(if $(HAVE_JPEG),-DTK_HAVE_JPEG) \
               $(if $(HAVE_PNG),-DTK_HAVE_PNG) -MMD -MP
FUZZ_BINS   := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_DIR)/%)

fuzz: $(FUZZ_BINS)

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_DIR)/libtrainkit.a: $(LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_BINS): $(FUZZ_DIR)/%: $(FUZZ_DIR)/obj/tests/fuzz/%.o $(FUZZ_DIR)/libtrainkit.a
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS) -lgomp

$(BUILD)/tests/gpu/%: $(BUILD)/obj/tests/gpu/%.cu.o $(LIBTK) $(LIBCU)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS) $(CUDA_LIBS)

$(BUILD)/tests/gpu/%: $(BUILD)/obj/tests/gpu/%.o $(LIBTK) $(LIBCU)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS) $(CUDA_LIBS)

# The sanitized replays are built after the rest, so they are newer than the plain ones (tests/run
# takes a sanitized replay only when it is not older than the plain one: a `make` after it left
# it stale).
check: all
	+@$(MAKE) --no-print-directory san-replay
	@BUILD=$(BUILD) tests/run

# A CUPTI trace of any program, ranks included (tests/gpu/trace_preload.c; for the device only).
trace-preload: $(BUILD)/tests/gpu/trace_preload.so
$(BUILD)/tests/gpu/trace_preload.so: tests/gpu/trace_preload.c tests/gpu/cupti_trace.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -shared -o $@ $< -ldl -lpthread

check-gpu: all $(GPUS)
	@BUILD=$(BUILD) tests/gpu/run

bench: all
	contrib/bench/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/trainkit \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	cp -R share/. $(DESTDIR)$(PREFIX)/share/trainkit/
	for s in 1 5 7; do for f in man/man$$s/*.$$s; do [ -e "$$f" ] && install -m 0644 $$f $(DESTDIR)$(PREFIX)/share/man/man$$s/; done; done; true

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/fuzz/obj -name '*.d' 2>/dev/null)
