# snug: build, test, sanitizers, fuzzing.
#   make            build build/snug, build/libsnug.a and build/examples/ (installs missing
#                   packages first)
#   make run        generate with the bundled demo model
#   make test       build and run every test; ends with "N passed, M failed"
#   make test-asan  unit tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make fuzz       run each libFuzzer harness for FUZZ_SECONDS (clang)
#   make shared     build/libsnug.so.VERSION (its objects built again with -fPIC)
#   make install    snug, libsnug.a, libsnug.so, snug.h and snug.pc under
#                   $(DESTDIR)$(PREFIX) (PREFIX=/usr/local); make uninstall removes them

CC        ?= cc
PKGS      := jansson libpcre2-8 libutf8proc libmicrohttpd
ARCH      ?= -march=native
OPT       ?= -O2
WARN      := -std=c11 -Wall -Wextra -Werror
# Recursive (=) so pkg-config runs after scripts/install-deps has.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))
# Tensor parallelism over Open MPI when its mpicc is there (scripts/install-deps
# installs it); MPI=0 builds a single-process snug (--tp 1 only). Recursive, as
# above; $(B)/mpi-flags remembers the choice, so that changing it rebuilds.
MPI ?= auto
MPI_ON = $(if $(filter 0,$(MPI)),0,$(if $(shell command -v mpicc 2>/dev/null),1,0))
MPI_CFLAGS = $(if $(filter 1,$(MPI_ON)),-DSNUG_HAVE_MPI=1 $(shell mpicc --showme:compile),)
MPI_LIBS = $(if $(filter 1,$(MPI_ON)),$(shell mpicc --showme:link),)
# -fopenmp-simd: the `#pragma omp simd` hints, no OpenMP runtime (snug's threads are its own
# pool, base/pool.h); only the bench programs that compare against OpenMP link it (BENCH_OMP).
CFLAGS_ALL = $(WARN) $(OPT) $(ARCH) -g -D_GNU_SOURCE -fopenmp-simd -Iinclude -Isrc $(PKG_CFLAGS) $(MPI_CFLAGS) $(CFLAGS)
LDLIBS_ALL = $(PKG_LIBS) $(MPI_LIBS) -lm -lpthread $(LDLIBS)

ASAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all

LIB_SRCS  := $(filter-out src/cli/%,$(wildcard src/*/*.c))
CLI_SRCS  := $(wildcard src/cli/*.c)
TEST_SRCS := $(wildcard tests/test_*.c)
# Helpers some tests share (the float64 reference model): no code from src/.
SUPPORT_SRCS := $(wildcard tests/support/*.c)
SUPPORT_OBJS := $(SUPPORT_SRCS:tests/support/%.c=build/tests/support/%.o)
ASAN_SUPPORT_OBJS := $(SUPPORT_SRCS:tests/support/%.c=build/asan/tests/support/%.o)
.SECONDARY: $(SUPPORT_OBJS) $(ASAN_SUPPORT_OBJS)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRCS))

B := build
LIB_OBJS  := $(LIB_SRCS:src/%.c=$(B)/obj/%.o)
CLI_OBJS  := $(CLI_SRCS:src/%.c=$(B)/obj/%.o) $(B)/obj/cli/build_info.o
TESTS     := $(TEST_SRCS:tests/%.c=$(B)/tests/%)
REPLAYS   := $(FUZZ_NAMES:%=$(B)/tests/replay_%)
# Programs that use the public API (snug.h) alone.
EXAMPLES  := $(patsubst examples/%.c,$(B)/examples/%,$(wildcard examples/*.c))

A := build/asan
P := build/pic
ASAN_LIB_OBJS := $(LIB_SRCS:src/%.c=$(A)/obj/%.o)
ASAN_TESTS    := $(TEST_SRCS:tests/%.c=$(A)/tests/%)
ASAN_REPLAYS  := $(FUZZ_NAMES:%=$(A)/tests/replay_%)

FUZZ_SECONDS ?= 60
# FUZZ_RUNS=N (with FUZZ_SEED) runs N inputs per harness from a fixed seed
# instead of for FUZZ_SECONDS: the same inputs on every machine (CI uses it).
FUZZ_RUNS ?=
FUZZ_SEED ?= 0
FUZZ_LIMIT = $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS) -seed=$(FUZZ_SEED),-max_total_time=$(FUZZ_SECONDS))
V ?= 0
ifeq ($(V),0)
Q := @
say = @printf '  %-6s %s\n' '$(1)' '$(2)';
else
Q :=
say =
endif
FUZZ_CC      ?= clang

.PHONY: FORCE all deps test-deps fuzz-deps run test test-asan fuzz bench-tools shared install uninstall clean
all: $(B)/snug $(B)/libsnug.a $(EXAMPLES)

deps:
	@scripts/install-deps

# rewritten only when the MPI choice changes
$(B)/mpi-flags: FORCE | deps
	@mkdir -p $(B)
	@echo '$(MPI_CFLAGS)' | cmp -s - $@ || echo '$(MPI_CFLAGS)' > $@
FORCE:
$(B)/obj/dist/comm_mpi.o $(B)/obj/dist/comm_single.o $(A)/obj/dist/comm_mpi.o $(A)/obj/dist/comm_single.o: $(B)/mpi-flags
$(P)/obj/dist/comm_mpi.o $(P)/obj/dist/comm_single.o: $(B)/mpi-flags

# What `snug --version` tells of the build: the commit (git rev-parse in a git checkout, else
# "unknown"), MPI on or off and the flags. A tiny generated source, rewritten only when its text
# changes: a new commit recompiles that one file and relinks snug, nothing else.
GIT_COMMIT = $(or $(if $(wildcard .git),$(shell git rev-parse --short HEAD 2>/dev/null)),unknown)
BUILD_OPTIONS = MPI $(if $(filter 1,$(MPI_ON)),on,off), ARCH $(ARCH), OPT $(OPT)
BUILD_INFO = '/* Written by the Makefile: what this build of snug was made from. */' \
    '\#include "cli/cli.h"' 'const char cli_build_commit[] = "$(GIT_COMMIT)";' \
    'const char cli_build_options[] = "$(subst ",\",$(BUILD_OPTIONS))";'
$(B)/gen/build_info.c: FORCE | deps
	@mkdir -p $(dir $@)
	@printf '%s\n' $(BUILD_INFO) | cmp -s - $@ || printf '%s\n' $(BUILD_INFO) >$@
$(B)/obj/cli/build_info.o: $(B)/gen/build_info.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(B)/obj/%.o: src/%.c | deps
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

# server/page.c takes the page's file in whole (.incbin), so its objects are rebuilt with it
PAGE := src/server/page/index.html
$(B)/obj/server/page.o $(A)/obj/server/page.o $(P)/obj/server/page.o: $(PAGE)

$(B)/libsnug.a: $(LIB_OBJS)
	@rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(B)/snug: $(CLI_OBJS) $(B)/libsnug.a
	$(call say,LINK,$@)$(CC) $(CFLAGS_ALL) -o $@ $(CLI_OBJS) $(B)/libsnug.a $(LDLIBS_ALL)

$(B)/examples/%: examples/%.c $(B)/libsnug.a
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -MMD -MP -o $@ $< $(B)/libsnug.a $(LDLIBS_ALL)

$(B)/tests/support/%.o: tests/support/%.c | deps
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -Itests -MMD -MP -c $< -o $@

$(B)/tests/%: tests/%.c tests/test.h $(SUPPORT_OBJS) $(B)/libsnug.a
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -Itests -MMD -MP -o $@ $< $(SUPPORT_OBJS) $(B)/libsnug.a $(LDLIBS_ALL)

$(B)/tests/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz_common.h $(B)/libsnug.a
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) -Itests -o $@ $< tests/fuzz/replay.c $(B)/libsnug.a $(LDLIBS_ALL)

run: all
	$(B)/snug generate -p "Once upon a time"

# tests/cli/cli.sh imports a GGUF that build/bench/mkgguf writes; tests/cli/install.sh
# installs into a temporary prefix (the shared library built here, so that it only copies)
# the page at / is tested in a browser: chromium, installed when missing
test-deps:
	@scripts/install-deps --browser

test: all $(TESTS) $(REPLAYS) $(EXAMPLES) $(B)/bench/mkgguf shared | test-deps
	@tests/run $(B)

# --- benchmark helpers (bench/*.c; not run by make test, which builds mkgguf) -
BENCH_TOOLS := $(patsubst bench/%.c,$(B)/bench/%,$(wildcard bench/*.c))
bench-tools: $(BENCH_TOOLS)
# those that run OpenMP themselves: pool.c measures the pool against a parallel region,
# limits.h (generate.c, matmul.c) reads memory bandwidth on OpenMP threads
BENCH_OMP := $(B)/bench/pool $(B)/bench/generate $(B)/bench/matmul
$(BENCH_OMP): BENCH_FLAGS := -fopenmp

$(B)/bench/%: bench/%.c $(B)/libsnug.a
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS_ALL) $(BENCH_FLAGS) -MMD -MP -o $@ $< $(B)/libsnug.a $(LDLIBS_ALL) $(BENCH_FLAGS)

# --- shared library, install ----------------------------------------------------
# The shared library's objects are the static library's built again with -fPIC under
# build/pic/, so that build/snug and libsnug.a keep their flags; `make` does not build
# them (they would double its compile time): `make shared`, `make install` and `make test`
# do. The version is snug.h's SNUG_VERSION; the soname carries its major number.
# Only what snug.h declares is exported: build/libsnug.map lists those functions (read
# from snug.h, so that a new declaration is exported with no second list to keep).
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALL    ?= install
VERSION    := $(shell sed -n 's/^\#define SNUG_VERSION "\(.*\)"/\1/p' include/snug.h)
SOMAJOR    := $(firstword $(subst ., ,$(VERSION)))
SONAME     := libsnug.so.$(SOMAJOR)
PIC_LIB_OBJS := $(LIB_SRCS:src/%.c=$(P)/obj/%.o)
SHLIB      := $(B)/libsnug.so.$(VERSION)

shared: $(SHLIB)

$(P)/obj/%.o: src/%.c | deps
	@mkdir -p $(dir $@)
	$(call say,CC,$< [pic])$(CC) $(CFLAGS_ALL) -fPIC -MMD -MP -c $< -o $@

$(B)/libsnug.map: include/snug.h
	@mkdir -p $(B)
	$(call say,GEN,$@){ echo '{ global:'; \
	  sed -n 's/^[^ /*#}].*[ *]\(snug_[a-z0-9_]*\)(.*/    \1;/p' $<; \
	  echo '  local: *; };'; } > $@

$(SHLIB): $(PIC_LIB_OBJS) $(B)/libsnug.map
	$(call say,LINK,$@)$(CC) $(CFLAGS_ALL) -shared -Wl,-soname,$(SONAME) \
	    -Wl,--version-script=$(B)/libsnug.map -Wl,--no-undefined \
	    -o $@ $(PIC_LIB_OBJS) $(LDLIBS_ALL)

# snug.pc for this PREFIX and this build's MPI choice; rewritten only when that changes.
# Requires.private names the Debian packages' pkg-config modules.
PC_LINES = 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' 'Name: snug' \
    'Description: LLM inference engine that knows what every byte of its memory is for' \
    'Version: $(VERSION)' 'Requires.private: $(PKGS)' 'Cflags: -I$${includedir}' \
    'Libs: -L$${libdir} -lsnug' 'Libs.private: $(MPI_LIBS) -lm -lpthread'
$(B)/snug.pc: FORCE | deps
	@mkdir -p $(B)
	@printf '%s\n' $(PC_LINES) | cmp -s - $@ || printf '%s\n' $(PC_LINES) > $@

install: $(B)/snug $(B)/libsnug.a $(SHLIB) $(B)/snug.pc
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 755 $(B)/snug $(DESTDIR)$(BINDIR)/snug
	$(INSTALL) -m 644 $(B)/libsnug.a $(DESTDIR)$(LIBDIR)/libsnug.a
	$(INSTALL) -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/libsnug.so.$(VERSION)
	ln -sf libsnug.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libsnug.so
	$(INSTALL) -m 644 include/snug.h $(DESTDIR)$(INCLUDEDIR)/snug.h
	$(INSTALL) -m 644 $(B)/snug.pc $(DESTDIR)$(PKGCONFIGDIR)/snug.pc

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/snug $(DESTDIR)$(LIBDIR)/libsnug.a \
	    $(DESTDIR)$(LIBDIR)/libsnug.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	    $(DESTDIR)$(LIBDIR)/libsnug.so $(DESTDIR)$(INCLUDEDIR)/snug.h \
	    $(DESTDIR)$(PKGCONFIGDIR)/snug.pc

# --- sanitizers ---------------------------------------------------------------
$(A)/obj/%.o: src/%.c | deps
	@mkdir -p $(dir $@)
	$(call say,CC,$< [asan])$(CC) $(CFLAGS_ALL) $(ASAN_FLAGS) -MMD -MP -c $< -o $@

$(A)/libsnug.a: $(ASAN_LIB_OBJS)
	@rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(A)/tests/support/%.o: tests/support/%.c | deps
	@mkdir -p $(dir $@)
	$(call say,CC,$< [asan])$(CC) $(CFLAGS_ALL) $(ASAN_FLAGS) -Itests -c $< -o $@

$(A)/tests/%: tests/%.c tests/test.h $(ASAN_SUPPORT_OBJS) $(A)/libsnug.a
	@mkdir -p $(dir $@)
	$(call say,CC,$< [asan])$(CC) $(CFLAGS_ALL) $(ASAN_FLAGS) -Itests -o $@ $< $(ASAN_SUPPORT_OBJS) $(A)/libsnug.a $(LDLIBS_ALL)

$(A)/tests/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz_common.h $(A)/libsnug.a
	@mkdir -p $(dir $@)
	$(call say,CC,$< [asan])$(CC) $(CFLAGS_ALL) $(ASAN_FLAGS) -Itests -o $@ $< tests/fuzz/replay.c $(A)/libsnug.a $(LDLIBS_ALL)

test-asan: $(ASAN_TESTS) $(ASAN_REPLAYS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    tests/run $(A) --unit

# --- fuzzing (clang, libFuzzer) -------------------------------------------------
# The library is built once with coverage and the sanitizers (fuzzer-no-link) into its own
# archive, which every harness links: one compile of each source, not one per harness.
F := build/fuzz
FUZZ_BASE := -std=c11 -O1 -g -D_GNU_SOURCE -fopenmp-simd -Iinclude -Isrc -Itests \
             -fno-sanitize-recover=all -Wno-pass-failed
FUZZ_FLAGS := $(FUZZ_BASE) -fsanitize=fuzzer,address,undefined
FUZZ_LIB_OBJS := $(LIB_SRCS:src/%.c=$(F)/obj/%.o)

fuzz-deps:
	@scripts/install-deps --fuzz

$(F)/obj/%.o: src/%.c | fuzz-deps
	@mkdir -p $(dir $@)
	$(call say,FUZZCC,$<)$(FUZZ_CC) $(FUZZ_BASE) -fsanitize=fuzzer-no-link,address,undefined $(PKG_CFLAGS) \
	    -MMD -MP -c $< -o $@
$(F)/obj/server/page.o: $(PAGE)

$(F)/libsnug.a: $(FUZZ_LIB_OBJS)
	@rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(F)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(F)/libsnug.a | fuzz-deps
	@mkdir -p $(dir $@)
	$(call say,FUZZCC,$<)$(FUZZ_CC) $(FUZZ_FLAGS) $(PKG_CFLAGS) -o $@ $< $(F)/libsnug.a $(PKG_LIBS) -lm -lpthread

fuzz: $(FUZZ_NAMES:%=$(F)/fuzz_%)
	@for n in $(FUZZ_NAMES); do \
	    mkdir -p $(F)/corpus-$$n; \
	    echo "fuzz $$n: $(FUZZ_LIMIT)"; \
	    $(F)/fuzz_$$n $(FUZZ_LIMIT) -print_final_stats=1 \
	        -artifact_prefix=$(F)/crash-$$n- $(F)/corpus-$$n tests/fuzz/$$n \
	        2>$(F)/log-$$n.txt || { tail -n 40 $(F)/log-$$n.txt; exit 1; }; \
	    grep -E 'stat::number_of_executed_units|stat::new_units_added' $(F)/log-$$n.txt; \
	done

clean:
	rm -rf build

-include $(wildcard $(B)/obj/*/*.d $(B)/tests/*.d $(B)/tests/support/*.d $(B)/examples/*.d $(B)/bench/*.d \
    $(A)/obj/*/*.d $(P)/obj/*/*.d $(F)/obj/*/*.d)
