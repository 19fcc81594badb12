# coli — one Makefile for the library, the tools, the tests and the PTX.
#
#   make            build build/coli (and build/colid when libmicrohttpd is present)
#   make deps       install missing Debian/Ubuntu packages (root + apt), else print the line
#   make test       deps + build + every test in tests/, one line each
#   make run        deps + build + the demo model: convert on first use, generate
#   make fuzz       the fuzz targets for a bounded time (clang; docs/fuzz.md)
#   make check-layers  includes and calls against the one-way rule between parts
#   make format     clang-format every C file in place
#
# Knobs: SAN=address,undefined   DEBUG=1   V=1 (show commands)   NVCC=path|no
#        TEST_JOBS=N (make test's build jobs; nproc by default)
#        TEST_PARALLEL=N (tests run N at a time; 1 by default: tests/run.sh)
#        FUZZ_SECONDS=N or FUZZ_RUNS=N, FUZZ_TARGETS="a b" (make fuzz)
# Changing SAN, DEBUG, NVCC or any flag rebuilds everything (build/.flags records them).

BUILD   ?= build
V       ?=
Q       := $(if $(V),,@)
CC      ?= cc
SAN     ?=
DEBUG   ?=
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
PKGS    := liburing numa libpcre2-8 libutf8proc jansson libxxhash
OPTPKGS := libmicrohttpd hwloc

# name of the Debian package providing each pkg-config module
DEB_liburing      := liburing-dev
DEB_numa          := libnuma-dev
DEB_libpcre2-8    := libpcre2-dev
DEB_libutf8proc   := libutf8proc-dev
DEB_jansson       := libjansson-dev
DEB_libxxhash     := libxxhash-dev
DEB_libmicrohttpd := libmicrohttpd-dev
DEB_hwloc         := libhwloc-dev
DEB_TOOLS         := pkg-config python3 python3-venv fio clang libclang-rt-dev

have = $(shell pkg-config --exists $(1) 2>/dev/null && echo yes || echo no)
$(foreach p,$(PKGS) $(OPTPKGS),$(eval HAVE_$(p) := $(call have,$(p))))
MISSING := $(strip $(foreach p,$(PKGS),$(if $(filter no,$(HAVE_$(p))),$(p))))

CFLAGS_BASE := -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes \
               -fno-strict-aliasing -ffp-contract=off -fPIC -pthread -I. -D_GNU_SOURCE
ifeq ($(DEBUG),1)
  OPT := -O0 -g3
else
  OPT := -O2 -g
endif
ifneq ($(SAN),)
  OPT += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDSAN := -fsanitize=$(SAN)
endif
PKG_CFLAGS := $(if $(MISSING),,$(shell pkg-config --cflags $(PKGS)))
PKG_LIBS   := $(if $(MISSING),,$(shell pkg-config --libs $(PKGS)))

ifneq ($(filter-out no,$(NVCC)),)
  HAVE_nvcc := yes
  GPU_DEF   := -DCOLI_HAVE_PTX=1
else
  HAVE_nvcc := no
  GPU_DEF   :=
endif
ifeq ($(HAVE_libmicrohttpd),yes)
  HTTP_CFLAGS := $(shell pkg-config --cflags libmicrohttpd)
  HTTP_LIBS   := $(shell pkg-config --libs libmicrohttpd)
endif
ifeq ($(HAVE_hwloc),yes)
  HWLOC_DEF  := -DCOLI_HAVE_HWLOC=1 $(shell pkg-config --cflags hwloc)
  HWLOC_LIBS := $(shell pkg-config --libs hwloc)
endif

CFLAGS  := $(CFLAGS_BASE) $(OPT) $(PKG_CFLAGS) $(GPU_DEF) $(HWLOC_DEF) $(EXTRA_CFLAGS)
LDLIBS  := $(PKG_LIBS) $(HWLOC_LIBS) -ldl -lm -pthread
LDFLAGS := $(LDSAN) $(EXTRA_LDFLAGS)

# Per-file ISA flags: *_avx2.c, *_avx512.c and *_amx.c are compiled for their ISA and
# only called after a cpuid check (cpu/cpu_dispatch.c).
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c
ISA_amx    := $(ISA_avx512) -mamx-tile -mamx-int8
# Under SAN those files are built at -O1, still instrumented: their
# always_inline tiles, unrolled by #pragma GCC unroll (gemv_avx512.c: 4 rows
# x 4 activations of 8 masked loads and dot products each, per block group,
# in one function), take GCC 12 minutes each to instrument and optimize at
# -O2. gemv_avx512.c on the 2-core host, 2026-12-02: 22 s plain -O2 and
# 133 s with address,undefined (lightly loaded); under the same heavy load
# 104 s plain -O2, 208 s -O2 address, 343 s -O2 undefined, 154 s -O1
# address,undefined.
ifneq ($(SAN),)
  ISA_avx2   += -O1
  ISA_avx512 += -O1
  ISA_amx    += -O1
endif

LIB_DIRS := core mem io cpu ptx
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)) $(wildcard core/*/*.c cpu/*/*.c ptx/*/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
COLID_SRC := $(wildcard tools/colid/*.c tools/colid/*/*.c)
COLID_OBJ := $(COLID_SRC:%.c=$(BUILD)/%.o)
TOOL_SRC := $(wildcard tools/*.c tools/cli/*.c tools/bench/*.c tools/bench/*/*.c)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/*/*.c)
TEST_BIN := $(TEST_SRC:%.c=$(BUILD)/%)
PTX_SRC  := $(wildcard ptx/*/*.cu)
PTX_HDR  := ptx/kernels_abi.h $(wildcard ptx/*/*.cuh)
# Kernels: ptx/PART/NAME.cu -> PTX, twice: compute_80 (JIT-compiled by the
# driver for any GPU from sm_80) and compute_90 (what ptx/gpu.c loads on
# sm_90+: the same code plus programmatic dependent launch,
# ptx/common/pdl.cuh) -> C strings coli_ptx_NAME and coli_ptx_NAME_90 linked
# into libcoli. IEEE-exact flags: the placement invariant needs the GPU to
# reproduce the CPU's bits. The outputs are flat, $(BUILD)/ptx/NAME.ptx and
# NAME_90.ptx (vpath finds NAME.cu in its part), so a NAME is one module
# whatever its folder, and no two parts may hold the same NAME.
NVCC_FLAGS := -ptx -arch=compute_80 -fmad=false -prec-div=true -prec-sqrt=true -ftz=false -I.
PTX_NAME := $(notdir $(PTX_SRC:.cu=))
ifneq ($(words $(PTX_NAME)),$(words $(sort $(PTX_NAME))))
  $(error ptx/: two .cu files share a name: $(sort $(PTX_SRC)))
endif
vpath %.cu $(sort $(dir $(PTX_SRC)))
ifeq ($(HAVE_nvcc),yes)
  LIB_OBJ += $(PTX_NAME:%=$(BUILD)/ptx/%_ptx.o) $(PTX_NAME:%=$(BUILD)/ptx/%_90_ptx.o)
endif

.PHONY: all deps probe test test-gpu run fuzz format clean ptx-check tests check-layers
COLID := $(if $(and $(filter yes,$(HAVE_libmicrohttpd)),$(wildcard tools/colid/colid.c)),$(BUILD)/colid)
all: probe $(BUILD)/coli $(COLID)

probe:
	@$(foreach p,$(PKGS) $(OPTPKGS) nvcc,printf '  %-14s %s\n' $(p) $(HAVE_$(p));)
	@$(if $(MISSING),echo "missing: $(MISSING) -- run 'make deps' (as root) or: apt-get install $(foreach p,$(MISSING),$(DEB_$(p)))"; exit 1)
	@$(if $(filter no,$(HAVE_nvcc)),echo "  (no nvcc: GPU path compiled out; coli says so at run time)")

deps:
	@sh tools/deps.sh $(foreach p,$(PKGS) $(OPTPKGS),$(DEB_$(p))) $(DEB_TOOLS)

# Rebuild everything when the flags change. After probe: under -j a missing
# package stops the build before the first compile.
$(BUILD)/.flags: FORCE | probe
	@mkdir -p $(BUILD)
	@echo '$(CC) $(CFLAGS) $(LDFLAGS) $(LDLIBS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS) $(LDFLAGS) $(LDLIBS)' > $@
FORCE:

$(BUILD)/%.o: %.c $(BUILD)/.flags
	@mkdir -p $(@D)
	@echo '  CC    $<'
	$(Q)$(CC) $(CFLAGS) $(ISA_$(lastword $(subst _, ,$(basename $(notdir $<))))) -MMD -MP -c $< -o $@

$(BUILD)/ptx/%.ptx: %.cu $(PTX_HDR) $(BUILD)/.flags
	@mkdir -p $(@D)
	@echo '  NVCC  $<'
	$(Q)$(NVCC) $(NVCC_FLAGS) -o $@ $<

$(BUILD)/ptx/%_90.ptx: %.cu $(PTX_HDR) $(BUILD)/.flags
	@mkdir -p $(@D)
	@echo '  NVCC  $< (compute_90)'
	$(Q)$(NVCC) $(subst compute_80,compute_90,$(NVCC_FLAGS)) -o $@ $<

$(BUILD)/ptx/%_ptx.c: $(BUILD)/ptx/%.ptx tools/embed_ptx.sh
	$(Q)sh tools/embed_ptx.sh coli_ptx_$* $< > $@

$(BUILD)/ptx/%_ptx.o: $(BUILD)/ptx/%_ptx.c
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libcoli.a: $(LIB_OBJ)
	@rm -f $@
	$(Q)ar rcs $@ $^

$(BUILD)/coli: $(TOOL_OBJ) $(BUILD)/libcoli.a
	@echo '  LD    $@'
	$(Q)$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libcoli.a $(LDLIBS)

$(COLID_OBJ): CFLAGS += $(HTTP_CFLAGS)
$(BUILD)/colid: $(COLID_OBJ) $(BUILD)/tools/tools_util.o $(BUILD)/libcoli.a
	@echo '  LD    $@'
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(HTTP_LIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libcoli.a $(BUILD)/.flags
	@mkdir -p $(@D)
	@echo '  TEST  $@'
	$(Q)$(CC) $(CFLAGS) -Itests -MMD -MP -o $@ $< $(BUILD)/libcoli.a $(LDFLAGS) $(LDLIBS)

tests: all $(TEST_BIN)

# make test builds on every core: TEST_JOBS jobs (nproc by default), unless
# make was given its own -j. ptx-check and check-layers name what they read
# (the build's PTX, all), so they start once it is there.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: deps
	@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(TEST_JOBS)) \
		tests ptx-check check-layers
	@BUILD=$(BUILD) sh tests/run.sh

# GPU tests: every kernel against the CPU reference (they skip without a GPU),
# then the scheduler's overlap / streaming / fault / CUDA_RELEASE_HOST reload
# test, which runs on GPU 0 besides the simulated device when there is one,
# colid's batch invariance on GPU 0 (tests/daemon/batch_invariance), and
# forwards of 2..16 tokens planned on GPU 0 (tests/core/plan_grouped).
test-gpu: deps
	@$(MAKE) --no-print-directory tests
	@BUILD=$(BUILD) sh tests/run.sh ptx
	@BUILD=$(BUILD) sh tests/run.sh core/overlap_release
	@BUILD=$(BUILD) sh tests/run.sh core/device_faults
	@COLI_TEST_GPU=1 BUILD=$(BUILD) sh tests/run.sh daemon/batch_invariance
	@COLI_TEST_GPU=1 BUILD=$(BUILD) sh tests/run.sh core/plan_grouped

# The demo: convert the bundled model on first use, then generate.
DEMO_HF   ?= models/demo
DEMO_COLI ?= $(BUILD)/demo.coli
DEMO_PROMPT ?= def read_file(path):
run: deps
	@$(MAKE) --no-print-directory all
	@sh tools/run_demo.sh $(BUILD) '$(DEMO_HF)' '$(DEMO_COLI)' '$(DEMO_PROMPT)'

# make ptx-check: assemble with ptxas, for the GPUs coli targets, the PTX the
# build embeds (compute_80's text for sm_80 and sm_90, compute_90's for
# sm_90), so a kernel that stops assembling is caught on machines without a
# GPU. A cubin a target under $(BUILD)/ptx-check/: make -j runs them side by
# side, and a second run redoes only what changed. `%_sm90` also matches
# NAME_90_sm90.cubin, the compute_90 text's (stem NAME_90).
ifeq ($(HAVE_nvcc),yes)
PTXAS     := $(dir $(NVCC))ptxas
PTX_TEXT  := $(PTX_NAME:%=$(BUILD)/ptx/%.ptx) $(PTX_NAME:%=$(BUILD)/ptx/%_90.ptx)
PTX_CUBIN := $(PTX_NAME:%=$(BUILD)/ptx-check/%_sm80.cubin) \
             $(PTX_NAME:%=$(BUILD)/ptx-check/%_sm90.cubin) \
             $(PTX_NAME:%=$(BUILD)/ptx-check/%_90_sm90.cubin)
.SECONDARY: $(PTX_TEXT)
$(BUILD)/ptx-check/%_sm80.cubin: $(BUILD)/ptx/%.ptx
	@mkdir -p $(@D)
	$(Q)$(PTXAS) -arch=sm_80 -o $@ $< || { rm -f $@; echo "ptx-check: $<: ptxas -arch=sm_80 failed"; exit 1; }
	@printf '  %-32s %s ok\n' $< sm_80
$(BUILD)/ptx-check/%_sm90.cubin: $(BUILD)/ptx/%.ptx
	@mkdir -p $(@D)
	$(Q)$(PTXAS) -arch=sm_90 -o $@ $< || { rm -f $@; echo "ptx-check: $<: ptxas -arch=sm_90 failed"; exit 1; }
	@printf '  %-32s %s ok\n' $< sm_90
ptx-check: $(PTX_CUBIN)
else
ptx-check:
	@echo "ptx-check: no nvcc on this machine; skipped"
endif

# The one-way rule between folders and core's parts (tools/check_layers.py
# says which may call which), over the sources' includes and the objects' calls.
check-layers: all
	@python3 tools/check_layers.py $(BUILD)

FUZZ_SECONDS ?= 30
fuzz:
	@BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) sh tools/fuzz/fuzz.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu')

clean:
	rm -rf $(BUILD)

# ---- install: libcoli as a library people embed (README, "Embedding") ----
# make install [PREFIX=/usr/local] [DESTDIR=...] [BINDIR= LIBDIR= INCLUDEDIR=
# PKGCONFIGDIR= SYSTEMDDIR=]: coli, colid (when built), libcoli.a, libcoli.so
# (soname libcoli.so.$(SO_MAJOR)), the public headers under INCLUDEDIR/coli/
# (core/coli.h includes cpu/dtype.h relative to itself), coli.pc and colid's
# systemd unit (ExecStart pointed at BINDIR). make uninstall, with the same
# variables, removes exactly those files, then the headers' folders if empty.
PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
SYSTEMDDIR   ?= $(PREFIX)/lib/systemd/system
SO_VERSION   := 0.1.0
SO_MAJOR     := 0
SO_FILE      := libcoli.so.$(SO_VERSION)
# coli.pc: the pkg-config modules libcoli links (colid's libmicrohttpd is not
# libcoli's), and in Libs.private their libraries as the build links them, so
# `pkg-config --static --maximum-traverse-depth=2` (pkgconf) links libcoli.a
# against them without asking for their own static closure
PC_REQUIRES  := $(PKGS) $(if $(filter yes,$(HAVE_hwloc)),hwloc)
D            := $(DESTDIR)
INSTALLED    := $(D)$(BINDIR)/coli $(if $(COLID),$(D)$(BINDIR)/colid) $(D)$(LIBDIR)/libcoli.a \
                $(D)$(LIBDIR)/$(SO_FILE) $(D)$(LIBDIR)/libcoli.so.$(SO_MAJOR) \
                $(D)$(LIBDIR)/libcoli.so $(D)$(INCLUDEDIR)/coli/coli.h \
                $(D)$(INCLUDEDIR)/coli/cpu/dtype.h $(D)$(PKGCONFIGDIR)/coli.pc \
                $(if $(COLID),$(D)$(SYSTEMDDIR)/colid.service)

.PHONY: install uninstall shared
shared: $(BUILD)/$(SO_FILE)

# -z defs: every symbol libcoli needs is in a library it names (libcuda is dlopen'ed)
$(BUILD)/$(SO_FILE): $(LIB_OBJ)
	@echo '  LD    $@'
	$(Q)$(CC) -shared -Wl,-soname,libcoli.so.$(SO_MAJOR) -Wl,-z,defs $(LDFLAGS) -o $@ \
		$(LIB_OBJ) $(LDLIBS)

install: $(BUILD)/coli $(COLID) $(BUILD)/libcoli.a $(BUILD)/$(SO_FILE)
	install -d $(D)$(BINDIR) $(D)$(LIBDIR) $(D)$(INCLUDEDIR)/coli/cpu $(D)$(PKGCONFIGDIR)
	install -m 755 $(BUILD)/coli $(COLID) $(D)$(BINDIR)/
	install -m 644 $(BUILD)/libcoli.a $(D)$(LIBDIR)/libcoli.a
	install -m 755 $(BUILD)/$(SO_FILE) $(D)$(LIBDIR)/$(SO_FILE)
	ln -sf $(SO_FILE) $(D)$(LIBDIR)/libcoli.so.$(SO_MAJOR)
	ln -sf libcoli.so.$(SO_MAJOR) $(D)$(LIBDIR)/libcoli.so
	install -m 644 core/coli.h $(D)$(INCLUDEDIR)/coli/coli.h
	install -m 644 cpu/dtype.h $(D)$(INCLUDEDIR)/coli/cpu/dtype.h
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
		'Name: coli' 'Description: MoE inference engine for models larger than VRAM' \
		'Version: $(SO_VERSION)' 'Requires.private: $(PC_REQUIRES)' \
		'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lcoli' \
		'Libs.private: $(LDLIBS)' > $(D)$(PKGCONFIGDIR)/coli.pc
	$(if $(COLID),install -d $(D)$(SYSTEMDDIR))
	$(if $(COLID),sed 's|/usr/local/bin/colid|$(BINDIR)/colid|' tools/colid/colid.service \
		> $(D)$(SYSTEMDDIR)/colid.service)

uninstall:
	rm -f $(INSTALLED)
	rmdir $(D)$(INCLUDEDIR)/coli/cpu $(D)$(INCLUDEDIR)/coli 2>/dev/null || true

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(COLID_OBJ:.o=.d) $(TEST_BIN:=.d)
