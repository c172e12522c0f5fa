# The whole setup is two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
# GPT-2's real BPE ranks ship inside the PyPI source archive of openai-whisper; tests use them for
# exact parity with tiktoken without any other network access.
GPT2_RANKS := .cache/gpt2.tiktoken
WHISPER    := openai-whisper==20250625

.PHONY: demo test test-fast bench clean

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

demo: $(VENV)/.core
	$(VENV)/bin/tokenmill demo

test: $(VENV)/.test $(GPT2_RANKS)
	TOKENMILL_GPT2_RANKS=$(GPT2_RANKS) $(PY) -m pytest -q -p no:cacheprovider --doctest-glob='*.md' src tests docs

bench: $(VENV)/.test
	$(PIP) install -e '.[bench]'
	$(PY) bench/tokenizers.py --corpus ../shared/corpora/en

clean:
	rm -rf $(VENV) .cache build dist src/*.egg-info
