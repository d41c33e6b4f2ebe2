# Two commands do everything on a fresh Debian machine with Swift 6:
#   make serve   runs the relying-party server on http://127.0.0.1:8080 with SQLite (./webauthn.sqlite)
#   make test    builds and runs every test
# Both install the system packages they need with apt-get when missing.

SHELL := /bin/bash
APT_PACKAGES := libssl-dev libcbor-dev libpq-dev libsqlite3-dev pkg-config openssl
# Only the tests need these: a throw-away PostgreSQL, and headless Chromium for the real-browser test.
TEST_APT_PACKAGES := postgresql chromium chromium-driver binutils
SELENIUM := selenium==4.45.0
SWIFT_BUILD_FLAGS ?=

.PHONY: deps test-deps build test serve demo bench docs clean
.PHONY: fuzz-build fuzz fuzz-smoke fuzz-seeds test-sanitizers test-asan test-tsan

# Installs the Debian packages named in $(1) that are missing.
define apt_install
	@missing=""; \
	for p in $(1); do dpkg -s "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing system packages:$$missing"; \
		if [ "$$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi
endef

deps:
	$(call apt_install,$(APT_PACKAGES))

test-deps: deps
	$(call apt_install,$(TEST_APT_PACKAGES))
	@python3 -c "import selenium, pytest" 2>/dev/null || python3 -m pip install -q "$(SELENIUM)" pytest

build: deps
	swift build --build-tests $(SWIFT_BUILD_FLAGS)

# The tests run with a throw-away PostgreSQL (Tests/postgres.sh), stopped whatever happens.
test: build test-deps
	@pgdir=$$(mktemp -d); \
	url=$$(bash Tests/postgres.sh start "$$pgdir") || exit 1; \
	trap 'bash Tests/postgres.sh stop "'"$$pgdir"'"' EXIT; \
	echo "PostgreSQL for the tests: $$url"; \
	WEBAUTHN_TEST_POSTGRES="$$url" swift test --skip-build $(SWIFT_BUILD_FLAGS) && \
	python3 -m pytest -q Tests/Browser

# The binary of the configuration SWIFT_BUILD_FLAGS names (debug by default, release with -c release).
serve: deps
	swift build --product webauthn $(SWIFT_BUILD_FLAGS)
	"$$(swift build --show-bin-path $(SWIFT_BUILD_FLAGS))/webauthn" serve $(SERVE_FLAGS)

demo: deps
	swift build --product webauthn-dev $(SWIFT_BUILD_FLAGS)
	"$$(swift build --show-bin-path $(SWIFT_BUILD_FLAGS))/webauthn-dev" demo

bench: deps
	swift build -c release --product webauthn-bench $(SWIFT_BUILD_FLAGS)
	.build/release/webauthn-bench

# The DocC documentation of WebAuthnCore, WebAuthnServer and SignInWithApple, as static sites in .build/docs/.
docs: deps
	@mkdir -p .build/docs; for target in WebAuthnCore WebAuthnServer SignInWithApple WebAuthnMetadata WebAuthnSQLite WebAuthnPostgres; do \
		swift package --allow-writing-to-directory .build/docs generate-documentation --target $$target \
			--disable-indexing --transform-for-static-hosting --output-path .build/docs/$$target || exit 1; \
	done

clean:
	rm -rf .build

# Fuzzing (Docs/Fuzzing.md): one libFuzzer binary, address sanitizer, debug (so every
# overflow and bounds check stays), built by the Fuzz/ package in .build-fuzz.
#   make fuzz                         every target FUZZ_SECONDS, FUZZ_JOBS at a time
#   make fuzz FUZZ_TARGETS="json cbor" FUZZ_SECONDS=600
#   make fuzz-smoke                   every target FUZZ_SMOKE_SECONDS (what CI runs)
FUZZ_SECONDS ?= 30
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_TARGETS ?=
FUZZ_BUILD_FLAGS := -c debug --scratch-path ../.build-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld

fuzz-build: deps
	cd Fuzz && swift build $(FUZZ_BUILD_FLAGS)

fuzz: fuzz-build
	Fuzz/run.sh -s $(FUZZ_SECONDS) -j $(FUZZ_JOBS) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	Fuzz/run.sh -s $(FUZZ_SMOKE_SECONDS) -j $(FUZZ_JOBS) $(FUZZ_TARGETS)

# Rewrites Fuzz/Corpus from TestVectors and the software authenticator (and Fuzz/Keys when missing).
fuzz-seeds: fuzz-build
	SWIFT_BACKTRACE=enable=no .build-fuzz/debug/webauthn-fuzz --write-seeds

# Sanitizers (Docs/Fuzzing.md): the Swift tests under address + undefined-behaviour
# sanitizers (.build-asan), and the concurrency tests under thread sanitizer (.build-tsan),
# each with a throw-away PostgreSQL as `make test` has. ASAN_TEST_FILTER / TSAN_TEST_FILTER
# are `swift test --filter` patterns (empty: every test).
ASAN_TEST_FILTER ?=
TSAN_TEST_FILTER ?= WebAuthnCoreTests\.(EngineTests|EngineSessionTests)|WebAuthnServerTests\.(StoreContractTests|CredentialLimitTests)
SANITIZER_ENV := SWIFT_BACKTRACE=enable=no UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

# Runs $(1) with WEBAUTHN_TEST_POSTGRES set to a throw-away PostgreSQL (Tests/postgres.sh).
define with_postgres
	@pgdir=$$(mktemp -d); \
	url=$$(bash Tests/postgres.sh start "$$pgdir") || exit 1; \
	trap 'bash Tests/postgres.sh stop "'"$$pgdir"'"' EXIT; \
	echo "PostgreSQL for the tests: $$url"; \
	WEBAUTHN_TEST_POSTGRES="$$url" $(1)
endef

test-sanitizers: test-asan test-tsan

# swiftc refuses -sanitize=undefined on Linux (Swift traps overflow and bounds itself), so UBSan
# instruments the C code in the build through -Xcc; the ASan runtime carries its handlers.
ASAN_BUILD_FLAGS := --sanitize=address -Xcc -fsanitize=undefined --scratch-path .build-asan

test-asan: deps test-deps
	swift build --build-tests $(ASAN_BUILD_FLAGS)
	$(call with_postgres,$(SANITIZER_ENV) swift test --skip-build $(ASAN_BUILD_FLAGS) $(if $(ASAN_TEST_FILTER),--filter '$(ASAN_TEST_FILTER)'))

test-tsan: deps test-deps
	swift build --build-tests --sanitize=thread --scratch-path .build-tsan
	$(call with_postgres,$(SANITIZER_ENV) swift test --skip-build --sanitize=thread --scratch-path .build-tsan $(if $(TSAN_TEST_FILTER),--filter '$(TSAN_TEST_FILTER)'))
