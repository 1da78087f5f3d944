# The two commands of the README: `make book` and `make test`. Everything installs into .venv.
PYTHON  ?= python3.11
PROFILE ?= ci
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
HTML    := _build/html/.built
PIP     := $(BIN)/python -m pip --disable-pip-version-check -q
BOOK_INPUTS := _config.yml _toc.yml $(shell find book -type f -not -name '*.tmp' 2>/dev/null)

.PHONY: book test install chapters html unit nbval sources scoreboard-check reproduce records strict browser clean edition

ifeq ($(PROFILE),ci)
book: chapters $(HTML)
else
book: edition
endif

# Install the package with the test and book extras, and register the `companion` kernel.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
	$(PIP) install -e ".[test,book]" 2>&1 | grep -v '^WARNING: Location' || true
	@$(BIN)/python -c "import companion, torch, papermill, nbval, myst_nb" \
	  || { echo "installation into $(VENV) failed; see the pip output above" >&2; exit 1; }
	$(BIN)/python -m ipykernel install --sys-prefix --name companion --display-name "Python (companion)" >/dev/null
	@touch $@

install: $(STAMP)

# Execute the chapters from the committed records in results/ci (skips those whose inputs are unchanged;
# trains only runs the records lack, none in a clean clone) and refresh the scoreboard.
chapters: $(STAMP)
	$(BIN)/companion chapters --profile $(PROFILE)

# The paper edition (`make book PROFILE=paper`): the book at the sources' scale from the committed records in
# results/paper, in minutes on any machine; it trains nothing, and a chapter whose runs are missing there
# says so. Built into _build/editions/paper/_build/html, beside the ci book.
edition: $(STAMP)
	$(BIN)/companion chapters --profile paper
	$(BIN)/jupyter-book build _build/editions/paper --all -W -n --keep-going

$(HTML): $(STAMP) $(BOOK_INPUTS)
	$(BIN)/jupyter-book build . --all -W -n --keep-going
	@touch $@

html: $(HTML)

test: $(STAMP) unit sources scoreboard-check reproduce nbval strict edition browser

unit: $(STAMP)
	$(BIN)/python -m pytest tests --ignore=tests/browser -q

sources: $(STAMP)
	$(BIN)/companion check-sources
	$(BIN)/python tools/tag_cells.py --check

scoreboard-check: $(STAMP)
	$(BIN)/companion scoreboard --check

# Retrain every run the chapters read, cold, into _build/reproduce/runs, and compare with the committed
# records: bitwise where this host computes like theirs, by verdict elsewhere (report in _build/reproduce/).
reproduce: $(STAMP)
	$(BIN)/companion reproduce

# After a numerics change (a new companion.identity.NUMERICS) or a new preset: train the records the
# chapters lack into results/ci and remove those no chapter reads; then `make book` and commit both.
records: $(STAMP)
	$(BIN)/companion chapters --runs-only --prune --profile ci

# nbval re-executes the committed chapters, which read the committed records.
nbval: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider --nbval --nbval-current-env \
	  --nbval-sanitize-with tests/sanitize.cfg book/chapters -q

strict: $(STAMP)
	$(BIN)/jupyter-book build . --all -W -n --keep-going
	@touch $(HTML)

browser: $(STAMP)
	$(BIN)/python -m pytest tests/browser -p no:cacheprovider -q -rs

clean:
	rm -rf _build
