# brokered — build, tests, sanitizer build, fuzz targets.
#
#   make                 release build in build/
#   make san             ASan+UBSan build in build-san/
#   make check           unit + end-to-end tests against build/ and build-san/
#   make check-full      the same with every case of the long matrices, all under build-san/ too
#   make fuzz            libFuzzer targets in build-fuzz/ (clang)
#   make format-check    clang-format on all sources
#   make analyze         clang's static analyzer on all sources (warnings are errors)
#   make shellcheck      shellcheck -S error on every script
#   make cross-aarch64   the aarch64 build with Debian's cross compiler (build-aarch64/)
#   make check-suites    real projects' test suites natively and under brokered (tests/suites/)
#   make install         install into $(DESTDIR)$(PREFIX) (default /usr/local); make uninstall
#
# Sources are picked up by wildcard: src/*.c and src/basic/*.c form the program, src/main.c holds
# main(); tests/unit/test-*.c are unit tests linked with everything but main; fuzz/fuzz-*.c are
# fuzz targets.

CC      ?= cc
# libcrypto: headers only; the store loads libcrypto.so.3 with dlopen when it first hashes.
# libseccomp: the unit tests only (brokered compiles its filter itself; test-syscall-table checks
# that it decides as libseccomp's would).
PKGS    := libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) libseccomp 2>/dev/null)
PKG_LIBS   := -ldl
TEST_LIBS  := $(shell pkg-config --libs libseccomp 2>/dev/null || echo -lseccomp)

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wformat-security -Wstrict-prototypes \
	-Wmissing-prototypes -Wmissing-declarations -Wpointer-arith -Wcast-align -Wvla \
	-Wimplicit-fallthrough -Wundef -Wwrite-strings -Wnull-dereference -Wold-style-definition \
	-Wredundant-decls -Werror=return-type -Wdate-time \
	-Wnested-externs -Wstrict-overflow=2 -Wno-unused-parameter
BASE_CFLAGS := -std=gnu17 -g -D_GNU_SOURCE -fno-strict-aliasing -fstack-protector-strong \
	-fPIE -Isrc $(WARN) $(PKG_CFLAGS)
BASE_LDFLAGS := -pie -Wl,-z,relro,-z,now

REL_CFLAGS := -O2 -D_FORTIFY_SOURCE=2
SAN_CFLAGS := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
SAN_LDFLAGS := -fsanitize=address,undefined

SRCS      := $(sort $(wildcard src/*.c src/basic/*.c))
LIB_SRCS  := $(filter-out src/main.c,$(SRCS))
UNIT_SRCS := $(sort $(wildcard tests/unit/test-*.c))
FUZZ_SRCS := $(sort $(wildcard fuzz/fuzz-*.c))
HELPER_SRCS := $(sort $(wildcard tests/helpers/*.c))

all: build/brokered build/brokered-sh helpers unit-bins

# ---- release build ----
V ?= 0
Q := $(if $(filter 1,$(V)),,@)

build/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@";)
	$(Q)$(CC) $(BASE_CFLAGS) $(REL_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

build/brokered: $(SRCS:%.c=build/%.o)
	$(CC) $(BASE_LDFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

build/brokered-sh: build/brokered
	ln -sf brokered $@

build/unit/%: build/tests/unit/%.o $(LIB_SRCS:%.c=build/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_LDFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)

build/helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(REL_CFLAGS) -o $@ $< -lpthread

unit-bins: $(UNIT_SRCS:tests/unit/%.c=build/unit/%)
helpers: $(HELPER_SRCS:tests/helpers/%.c=build/helpers/%)

# ---- sanitizer build ----
build-san/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@";)
	$(Q)$(CC) $(BASE_CFLAGS) $(SAN_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

build-san/brokered: $(SRCS:%.c=build-san/%.o)
	$(CC) $(BASE_LDFLAGS) $(SAN_LDFLAGS) -o $@ $^ $(PKG_LIBS)

build-san/brokered-sh: build-san/brokered
	ln -sf brokered $@

build-san/unit/%: build-san/tests/unit/%.o $(LIB_SRCS:%.c=build-san/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_LDFLAGS) $(SAN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)

san: build-san/brokered build-san/brokered-sh $(UNIT_SRCS:tests/unit/%.c=build-san/unit/%)

# ---- fuzzing (clang + libFuzzer) ----
FUZZ_CC ?= clang
comma := ,
FUZZ_CFLAGS := -std=gnu17 -g -O1 -D_GNU_SOURCE -Isrc -fsanitize=fuzzer,address,undefined \
	$(PKG_CFLAGS) -Wall -Wextra -Werror -Wno-unused-parameter

# The library is compiled once (instrumented, without libFuzzer's main) and linked into each target.
FUZZ_LIB_CFLAGS := $(subst -fsanitize=fuzzer$(comma),-fsanitize=fuzzer-no-link$(comma),$(FUZZ_CFLAGS))

build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@";)
	$(Q)$(FUZZ_CC) $(FUZZ_LIB_CFLAGS) -MMD -MP -c $< -o $@

build-fuzz/%: fuzz/%.c $(LIB_SRCS:%.c=build-fuzz/obj/%.o)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ    $@";)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(LIB_SRCS:%.c=build-fuzz/obj/%.o) $(PKG_LIBS)

fuzz: $(FUZZ_SRCS:fuzz/%.c=build-fuzz/%)

# ---- static checks ----
# clang's analyzer, its malloc checker aside (it does not model the cleanup attributes). Loops
# are unrolled twice, not four times: a third of the time, and within its budget of paths the
# analyzer reaches deeper into the functions (it found an unchecked calloc the default missed).
ANALYZE_FLAGS := --analyze -Xanalyzer -analyzer-disable-checker=unix.Malloc -Xanalyzer \
	-analyzer-output=text -Xanalyzer -analyzer-max-loop -Xanalyzer 2 -Xclang -analyzer-werror \
	-std=gnu17 -D_GNU_SOURCE -Isrc $(PKG_CFLAGS)

build-analyze/%.ok: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  ANALYZE $<";)
	$(Q)clang $(ANALYZE_FLAGS) $< -o /dev/null
	@touch $@

analyze: $(SRCS:%.c=build-analyze/%.ok)

shellcheck:
	shellcheck -S error $(shell git ls-files '*.sh' .ci/run test.sh 2>/dev/null || find . -name '*.sh')

# aarch64 cross build (Debian's gcc-aarch64-linux-gnu and the :arm64 libraries)
CROSS_AARCH64 ?= aarch64-linux-gnu-
build-aarch64/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@";)
	$(Q)$(CROSS_AARCH64)gcc $(BASE_CFLAGS) $(REL_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

build-aarch64/brokered: $(SRCS:%.c=build-aarch64/%.o)
	$(CROSS_AARCH64)gcc $(BASE_LDFLAGS) $(LDFLAGS) -o $@ $^ -ldl

cross-aarch64: build-aarch64/brokered

lint: format-check analyze shellcheck
# ---- install ----
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
INSTALL     ?= install
# The binary to install (the tests install the build they test).
INSTALL_BIN ?= build/brokered

# Every installed file, relative to $(DESTDIR): uninstall removes exactly these.
INSTALLED := $(BINDIR)/brokered $(BINDIR)/brokered-sh $(MANDIR)/man1/brokered.1 \
	$(MANDIR)/man5/brokered-settings.5 $(BASHCOMPDIR)/brokered $(ZSHCOMPDIR)/_brokered \
	$(FISHCOMPDIR)/brokered.fish $(USERUNITDIR)/brokered-serve@.service

install: $(INSTALL_BIN)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR) \
		$(DESTDIR)$(USERUNITDIR)
	$(INSTALL) -m 755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/brokered
	ln -sf brokered $(DESTDIR)$(BINDIR)/brokered-sh
	$(INSTALL) -m 644 man/brokered.1 $(DESTDIR)$(MANDIR)/man1/brokered.1
	$(INSTALL) -m 644 man/brokered-settings.5 $(DESTDIR)$(MANDIR)/man5/brokered-settings.5
	$(INSTALL) -m 644 completions/brokered.bash $(DESTDIR)$(BASHCOMPDIR)/brokered
	$(INSTALL) -m 644 completions/_brokered $(DESTDIR)$(ZSHCOMPDIR)/_brokered
	$(INSTALL) -m 644 completions/brokered.fish $(DESTDIR)$(FISHCOMPDIR)/brokered.fish
	sed 's|@BINDIR@|$(BINDIR)|g' contrib/systemd/brokered-serve@.service.in \
		>$(DESTDIR)$(USERUNITDIR)/brokered-serve@.service
	chmod 644 $(DESTDIR)$(USERUNITDIR)/brokered-serve@.service

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))

# ---- tests ----
check: all san
	tests/run.sh

# Every case of the tool matrices for every implementation, and every script under the sanitizer
# build too (about twice the default run's time)
check-full: all san
	BROKERED_TEST_FULL=1 tests/run.sh

# The transparency harness, as root and (from root) as the unprivileged test user; long, not in
# `make check`. Builds of the suites are cached in BROKERED_SUITES_CACHE.
SUITES_USER ?= brokered-test
check-suites: all
	scripts/deps.sh suites
	st=0; tests/suites/run.sh || st=1; \
	if [ "$$(id -u)" -eq 0 ]; then \
		id $(SUITES_USER) >/dev/null 2>&1 || useradd -r -m -s /bin/bash $(SUITES_USER); \
		tests/suites/run.sh --as $(SUITES_USER) || st=1; \
	fi; exit $$st

format-check:
	clang-format --dry-run -Werror $(SRCS) $(wildcard src/*.h src/basic/*.h) $(UNIT_SRCS) $(FUZZ_SRCS)

clean:
	rm -rf build build-san build-fuzz build-analyze build-aarch64

.PHONY: all san fuzz check check-full check-suites format-check analyze shellcheck cross-aarch64 lint clean unit-bins helpers install uninstall
.SECONDARY:

-include $(shell find build build-san build-aarch64 build-fuzz -name '*.d' 2>/dev/null)
