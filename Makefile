# The two commands of the README: `make book` and `make test`. Everything installs into .venv.
PYTHON  ?= python3.11
PROFILE ?= ci
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
HTML    := _build/html/.built
PIP     := $(BIN)/python -m pip --disable-pip-version-check -q
BOOK_INPUTS := _config.yml _toc.yml $(shell find book -type f -not -name '*.tmp' 2>/dev/null)

.PHONY: book test install chapters html unit nbval sources scoreboard-check strict browser clean

book: chapters $(HTML)

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

# Execute the chapters (skips those whose inputs are unchanged) and refresh the scoreboard.
chapters: $(STAMP)
	$(BIN)/companion chapters --profile $(PROFILE)

$(HTML): $(STAMP) $(BOOK_INPUTS)
	$(BIN)/jupyter-book build . --all -W -n --keep-going
	@touch $@

html: $(HTML)

test: $(STAMP) unit sources scoreboard-check nbval strict browser

unit: $(STAMP)
	$(BIN)/python -m pytest tests --ignore=tests/browser -q

sources: $(STAMP)
	$(BIN)/companion check-sources
	$(BIN)/python tools/tag_cells.py --check

scoreboard-check: $(STAMP)
	$(BIN)/companion scoreboard --check

# nbval re-executes the committed chapters; their runs are trained first in one sweep (a clone
# whose store is empty), so the chapters' cells only read the store.
nbval: $(STAMP)
	$(BIN)/companion chapters --runs-only --profile ci
	$(BIN)/python -m pytest -p no:cacheprovider --nbval --nbval-current-env \
	  --nbval-sanitize-with tests/sanitize.cfg book/chapters -q

strict: $(STAMP)
	$(BIN)/jupyter-book build . --all -W -n --keep-going
	@touch $(HTML)

browser: $(STAMP)
	$(BIN)/python -m pytest tests/browser -p no:cacheprovider -q -rs

clean:
	rm -rf _build
