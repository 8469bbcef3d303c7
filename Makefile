# The two commands of the README, and the helpers around them.
.PHONY: dev test test-unit test-db test-gateway test-system test-load soak bench bench-dev bench-startup bench-load profile-load release minroot image image-check build deps db-start db-stop migrate format lint clean fuzz reading-path

DEV_PG_DIR  := .data/postgres
DEV_PG_PORT ?= 25432
DEV_HTTP_PORT ?= 3000
# make dev's cluster asks for the postgres role's password over TCP (scripts/pg.sh, PG_PASSWORD_FILE): no other local
# user may connect as its superuser. The file is made (0600) at the first start.
DEV_PG_PASSWORD_FILE := .data/postgres.password
DEV_DB_URL   = $(shell PG_PASSWORD_FILE=$(DEV_PG_PASSWORD_FILE) scripts/pg.sh url $(DEV_PG_PORT))
DEV_POOLER_PORT ?= 26432

## make test: install what is missing, start a throwaway PostgreSQL, build, run every test.
test:
	scripts/test.sh

## One kind of test at a time (docs/development.md#tests): test-unit needs no database and runs in seconds after the
## build; the others start the throwaway PostgreSQL. test-system and test-load hold fixed ports: one run at a time.
test-unit:
	scripts/test.sh --unit

test-db:
	scripts/test.sh --filter '^DatabaseTests\.'

test-gateway:
	scripts/test.sh --filter '^GatewayTests\.'

test-system:
	scripts/test.sh --filter '^SystemTests\.'

test-load:
	scripts/test.sh --filter '^LoadTests\.'

## make soak: the load and fault suite for LOAD_SECONDS (default 300) each, then wrk on the warm runner.
soak:
	scripts/soak.sh

## make bench: release build, throwaway PostgreSQL, benchmarks written to docs/benchmarks.md. The functions measured
## are the zips `make release` makes (scripts/release.sh runs first), against C floors built from Tests/Benchmarks/c.
## Then the edit loop of runner dev (scripts/bench-dev.sh → docs/benchmarks-dev.md).
bench:
	scripts/bench.sh
	scripts/bench-dev.sh

## make bench-dev: only the edit loop's section (runner dev: save → first response with the new code), written to
## docs/benchmarks-dev.md.
bench-dev: deps
	scripts/bench-dev.sh

## make bench-startup: only the start-up section (the shipped functions against the C floors, with its
## profile) and the push_devices-size section, written to bench-out/startup.md; docs/benchmarks.md is left alone.
bench-startup:
	mkdir -p bench-out
	BENCH_ONLY=startup BENCH_OUTPUT=bench-out/startup.md scripts/bench.sh

## make bench-load: only the load section (the whole recording under an open-loop load on the production host, by rate),
## written to bench-out/load.md; docs/benchmarks.md is left alone. BENCH_LOAD_RATES (20,50,100,200,300),
## BENCH_LOAD_SECONDS (20 per rate), BENCH_LOAD_RETRY_AFTER_RATE (100; 0: no Retry-After run).
bench-load:
	mkdir -p bench-out
	BENCH_ONLY=load BENCH_OUTPUT=bench-out/load.md scripts/bench.sh

## make profile-load: where a recording's CPU goes — the load section at 200 recordings/s under `perf record -a -g`,
## summarised by process, library and layer into bench-out/profile.md (scripts/profile-load.sh RATE SECONDS; needs perf).
profile-load:
	scripts/profile-load.sh

## make fuzz: build the libFuzzer harnesses (Tests/Fuzz) with -sanitize=fuzzer,address into .build-fuzz and run each
## for FUZZ_SECONDS (default 60); non-zero exit and the artifact path when one finds a crash or a broken invariant.
fuzz: deps
	scripts/fuzz.sh

## make release: release builds and one self-contained Lambda zip per function in dist/lambda/ (bootstrap, the
## libraries it needs beyond glibc in lib/, run path $$ORIGIN/lib; nothing needs glibc above 2.34). docs/deploy.md.
release: deps
	scripts/release.sh

## make minroot: the minimal Debian root (debootstrap minbase, under .build/minroot) in which make test runs each
## unzipped bootstrap; built once (about a minute with a fast mirror), then reused. make test builds it when missing.
minroot: deps
	scripts/minroot.sh

## make image: the container image (infra/docker/Dockerfile) with buildah, from the release artifacts (the zips of
## make release and the gateway's release build), on the local minroot unless IMAGE_BASE names another base (e.g.
## IMAGE_BASE=debian:12.11-slim); tagged IMAGE_TAG (localhost/caregiver-push:latest). docs/deploy.md.
image: deps
	scripts/image.sh

## make image-check: make image, then start it from its own root file system (read-only, user 10001) against a
## throwaway PostgreSQL and the FCM emulator; a registration and a dose through it must push (part of make test).
image-check: deps build
	scripts/with-db.sh $${TEST_PG_PORT:-25433} scripts/image-check.sh

## make dev: install what is missing, build, then `runner dev`: PostgreSQL under .data/ (as root with a checkout the
## postgres user cannot reach, such as one under /root: under /var/lib/caregiver-push/, linked from .data/), migrations, demo data,
## the runner with the FCM emulator on :3000 (DEV_HTTP_PORT), the console at http://127.0.0.1:3000/_dev, and ready-to-paste curl lines. Ctrl-C stops it (the
## database keeps running; `make db-stop` stops it). `make dev POOLER=1`: the functions reach the database through
## PgBouncer in transaction mode on :$(DEV_POOLER_PORT), as in production (`runner dev --pooler`).
## DEV_BIN_DIR=DIR: use the runner and functions already built in DIR instead of building (scripts/dev-check.sh).
dev: deps $(if $(DEV_BIN_DIR),,build)
	"$(if $(DEV_BIN_DIR),$(DEV_BIN_DIR),$$(swift build --show-bin-path))/runner" dev --port $(DEV_HTTP_PORT) --database-port $(DEV_PG_PORT) \
		$(if $(POOLER),--pooler --pooler-port $(DEV_POOLER_PORT))

deps:
	@scripts/install-deps.sh

build: deps
	swift build

db-start:
	mkdir -p .data
	PG_PASSWORD_FILE=$(DEV_PG_PASSWORD_FILE) scripts/pg.sh start $(DEV_PG_DIR) $(DEV_PG_PORT)

db-stop:
	PG_PASSWORD_FILE=$(DEV_PG_PASSWORD_FILE) scripts/pgbouncer.sh stop .data/pgbouncer
	scripts/pg.sh stop $(DEV_PG_DIR)

migrate:
	DATABASE_URL="$(DEV_DB_URL)" "$$(swift build --show-bin-path)/runner" migrate

format:
	swift format --in-place --recursive Package.swift Functions Shared Gateway runner Tests Client

lint:
	swift format lint --strict --recursive Package.swift Functions Shared Gateway runner Tests Client

clean:
	-scripts/pgbouncer.sh stop .data/pgbouncer
	-scripts/pg.sh stop $(DEV_PG_DIR)
	@# As root with a checkout postgres cannot reach, .data/postgres and .data/pgbouncer link to the cluster's home.
	for link in $(DEV_PG_DIR) .data/pgbouncer; do if [ -L "$$link" ]; then rm -rf "$$(readlink -f "$$link")"; fi; done
	rm -rf .build .build-lever-* .data

## make reading-path: the reading path of one dose-record (one-shot, caregiver token, push owed), measured with gdb
## against a throwaway PostgreSQL and the FCM emulator: the files a newcomer opens in execution order and the jumps
## back, to stdout and through the push (scripts/reading-path.sh → bench-out/reading-path.md). Needs gdb.
reading-path: build
	scripts/reading-path.sh bench-out/reading-path.md
