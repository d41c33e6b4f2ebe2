# Two commands do everything on a fresh Debian machine with Swift 6:
#   make serve   runs the relying-party server on http://127.0.0.1:8080 with SQLite (./webauthn.sqlite)
#   make test    builds and runs every test
# Both install the system packages they need with apt-get when missing.

SHELL := /bin/bash
APT_PACKAGES := libssl-dev libcbor-dev libpq-dev pkg-config openssl
# Only the tests need these: a throw-away PostgreSQL, and headless Chromium for the real-browser test.
TEST_APT_PACKAGES := postgresql chromium chromium-driver
SELENIUM := selenium==4.45.0
SWIFT_BUILD_FLAGS ?=

.PHONY: deps test-deps build test serve demo bench clean

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

serve: deps
	swift build --product webauthn $(SWIFT_BUILD_FLAGS)
	.build/debug/webauthn serve $(SERVE_FLAGS)

demo: deps
	swift build --product webauthn $(SWIFT_BUILD_FLAGS)
	.build/debug/webauthn demo

bench: deps
	swift build -c release --product webauthn $(SWIFT_BUILD_FLAGS)
	.build/release/webauthn bench

clean:
	rm -rf .build
