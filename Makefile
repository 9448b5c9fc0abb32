# gspmd's two commands (see README.md):
#   make demo   build, then run the example pipeline
#   make test   build, then run the test suite (plain build, ASan+UBSan build, and the threads
#               runtime under TSan)
# Both (and a bare `make`) first make sure the Debian packages gspmd needs are installed
# (apt-get, as root; otherwise it prints the missing ones and the install line).

# llvm-14-tools: FileCheck, which grades `gspmd sdy-opt` in ../shared/conformance (stage shardy).
# coinor-libcbc-dev: CBC, the integer-program solver of `gspmd autoshard`.
PACKAGES := cmake make gcc g++ pkg-config python3 libopenblas-dev libcjson-dev libcmocka-dev \
            libopenmpi-dev openmpi-bin llvm-14-tools coinor-libcbc-dev
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps build test test-fast demo soak soak-mpi fuzz fuzz-deps clean install embed-check

all: deps build

deps:
	@command -v dpkg-query >/dev/null || exit 0; \
	missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "gspmd: installing$$missing"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y --no-install-recommends $$missing >/dev/null 2>&1 || \
	      { apt-get update >/dev/null && apt-get install -y --no-install-recommends $$missing; } || exit 1; \
	  else \
	    echo "gspmd: missing Debian packages:$$missing"; \
	    echo "gspmd: install them with: sudo apt-get install$$missing"; exit 1; \
	  fi; \
	fi

build:
	@cmake -S . -B $(BUILD) -DGSPMD_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@cmake -S . -B $(ASAN_BUILD) -DGSPMD_WERROR=ON -DGSPMD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE nosan
	@cmake -S . -B $(TSAN_BUILD) -DGSPMD_WERROR=ON -DGSPMD_TSAN=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target gspmd
	cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -R '^runtime/'

# Installs the library, headers, CLI, gspmd.pc and the CMake package into PREFIX.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The library as a user embeds it: installed into a temporary prefix, examples/embed built with
# pkg-config and with find_package(gspmd), run (partition, 4 devices, verify), and every public
# header compiled as C++17 (examples/embed/check.sh). CI runs it after make test.
embed-check: deps build
	@prefix=$$(mktemp -d) && cmake --install $(BUILD) --prefix $$prefix >/dev/null && \
	  ./examples/embed/check.sh $$prefix; rc=$$?; rm -rf $$prefix; exit $$rc

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The partition property test over many seeds (not part of `make test`): SOAK_SEEDS seeds of
# SOAK_CASES random graphs each (default 50 x 20,000 = 1,000,000), SOAK_FIRST the first seed.
SOAK_SEEDS ?= 50
SOAK_CASES ?= 20000
SOAK_FIRST ?=
soak: deps build
	@./tests/soak.sh $(BUILD) $(SOAK_SEEDS) $(SOAK_CASES) $(SOAK_FIRST)

# The same on the MPI backend (not part of `make test`): under mpirun -np SOAK_RANKS, the cases
# whose device count the ranks divide (default 5 seeds x 2,000 graphs, about half of them run).
SOAK_MPI_SEEDS ?= 5
SOAK_MPI_CASES ?= 2000
SOAK_RANKS ?= 2
soak-mpi: deps build
	@./tests/soak_mpi.sh $(BUILD) $(SOAK_MPI_SEEDS) $(SOAK_MPI_CASES) "$(SOAK_FIRST)" $(SOAK_RANKS)

# The libFuzzer targets in tests/fuzz (not part of `make test`): built with clang, ASan and UBSan
# in $(FUZZ_BUILD), each run for FUZZ_SECONDS in one process, one after the other (FUZZ_TARGETS
# picks some: parse sharding front npy pipeline); fails on any finding. clang and its libFuzzer
# runtime are installed here when missing (FUZZ_PACKAGES), not by deps.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= parse sharding front npy pipeline
FUZZ_PACKAGES := clang libclang-rt-14-dev
fuzz-deps:
	@missing=""; for p in $(FUZZ_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "gspmd: installing$$missing (for make fuzz)"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y --no-install-recommends $$missing >/dev/null 2>&1 || \
	      { apt-get update >/dev/null && apt-get install -y --no-install-recommends $$missing; } || exit 1; \
	  else \
	    echo "gspmd: make fuzz needs Debian packages:$$missing"; \
	    echo "gspmd: install them with: sudo apt-get install$$missing"; exit 1; \
	  fi; \
	fi

fuzz: deps fuzz-deps
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DGSPMD_FUZZ=ON -DGSPMD_TESTS=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all
	@./tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

demo: deps build
	@./examples/demo.sh $(BUILD)/gspmd

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
