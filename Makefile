# The two commands of the README: `make book` and `make test`. Everything installs into .venv, from the
# hashed lock file requirements.lock (regenerate it with `make lock`).
# PYTHON: the first of Python 3.11, 3.12, 3.13 found on PATH, in pyenv or in /usr/bin (tools/pythons.py).
PYTHON  ?= $(shell python3 tools/pythons.py --first 2>/dev/null || echo python3.11)
PROFILE ?= ci
VENV    ?= .venv
LOCK    := requirements.lock
INSTALLER ?= uv
UV_HOME := _build/uv
UV      := $(UV_HOME)/bin/uv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
HTML    := _build/html/.built
PIP     := $(BIN)/python -m pip --disable-pip-version-check -q
BOOK_INPUTS := _config.yml _toc.yml $(shell find book -type f -not -name '*.tmp' 2>/dev/null)

.PHONY: book test check install chapters html unit nbval sources scoreboard-check reproduce records strict browser clean edition \
	lock lock-check other-python wheel-check pdf pdf-check

ifeq ($(PROFILE),ci)
book: chapters $(HTML)
else
book: edition
endif

# Install exactly the lock (every file checked against its hash, nothing resolved), then the package itself
# without dependencies, check that the environment equals the lock, and register the `companion` kernel. (Before
# 0.2.0 the distribution was called `companion`; an old .venv's copy is removed first, so that its uninstall can
# never take the `companion` command of `attention-priors` with it.)
# INSTALLER=uv (default): uv, itself pinned by hash in tools/uv-requirements.txt and kept in _build/uv, is
# 3.4x faster than pip here even though it downloads torch's 3 GB that pip takes from this disk (README,
# "Installing"); if uv cannot be installed, pip does the same install. INSTALLER=pip: pip only.
$(UV):
	$(PYTHON) -m venv $(UV_HOME) && $(UV_HOME)/bin/python -m pip -q install --require-hashes -r tools/uv-requirements.txt

$(STAMP): pyproject.toml $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(PIP) uninstall -y companion >/dev/null 2>&1 || true
	@if [ "$(INSTALLER)" = uv ] && { test -x $(UV) || $(MAKE) --no-print-directory $(UV) 2>&1 | grep -v '^WARNING: Location'; test -x $(UV); }; then \
	  echo "installing $(LOCK) into $(VENV) with uv"; \
	  $(UV) pip install -q --python $(BIN)/python --require-hashes --no-deps -r $(LOCK) \
	  && $(UV) pip install -q --python $(BIN)/python --no-deps --no-build-isolation -e . ; \
	else \
	  if [ "$(INSTALLER)" = uv ]; then echo "uv could not be installed (see above); installing with pip"; fi; \
	  echo "installing $(LOCK) into $(VENV) with pip"; \
	  { $(PIP) install --require-hashes --no-deps -r $(LOCK) && $(PIP) install --no-deps --no-build-isolation -e . ; } \
	    2>&1 | grep -v '^WARNING: Location'; \
	fi; true
	@$(BIN)/python -c "import companion, torch, papermill, nbval, myst_nb" \
	  || { echo "installation into $(VENV) failed; see the output above" >&2; exit 1; }
	$(BIN)/python tools/lockfile.py check $(LOCK)
	$(BIN)/python -m ipykernel install --sys-prefix --name companion --display-name "Python (companion)" >/dev/null
	@touch $@

install: $(STAMP)

# Resolve pyproject.toml's dependencies (with the test and book extras) into requirements.lock, with the
# hashes of every file, in two passes: for Python 3.11 on Linux (the versions CI tests), then for every
# supported Python and platform constrained to those versions, so that 3.11, 3.12 and 3.13 get the same
# release of every package. Run it after changing a dependency in pyproject.toml (it keeps every pin it
# can); `make lock UPGRADE=1` moves every package to its newest release (then re-execute the chapters and
# run `make test`: new versions can change a table's HTML). uv resolves; it lives in _build/uv, not in .venv.
LOCK_FLOOR := 3.11.5
lock: $(UV)
	@mkdir -p _build/lock && cp $(LOCK) _build/lock/base.txt 2>/dev/null || true
	$(UV) pip compile pyproject.toml --extra test --extra book --python-version $(LOCK_FLOOR) \
	  --python-platform x86_64-manylinux_2_28 $(if $(UPGRADE),--upgrade) -q -o _build/lock/base.txt
	$(UV) pip compile pyproject.toml --extra test --extra book --universal --python-version $(LOCK_FLOOR) \
	  -c _build/lock/base.txt --generate-hashes --custom-compile-command "make lock" -o $(LOCK)

# The lock agrees with pyproject.toml on every supported Python, and .venv equals it (pip freeze).
lock-check: $(STAMP)
	$(BIN)/python tools/lockfile.py check $(LOCK)

# The second Python as a smoke (tests/tiers.py, `interpreter`): in its own .venv-<version> from the same lock,
# the tests of what another interpreter could break (pickling and multiprocessing start methods, typing and
# the configs, ctypes, the command line, the lock, the golden runs retrained against their records) and nbval
# on Chapter 3 (the committed records read into tables). The whole suite runs on the first Python only: the
# lock pins the same release of every package on 3.11-3.13. One line says so where no second Python exists.
OTHER_TESTS ?= tests --ignore=tests/browser -m "interpreter and not slow and not gpu" -n auto --dist loadgroup
OTHER_NBVAL ?= book/chapters/03_boolean_extrapolation.ipynb
other-python:
	@other=$$(python3 tools/pythons.py --other "$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')"); \
	if [ -z "$$other" ]; then echo "other-python: no second Python 3.11-3.13 on this machine; skipped"; exit 0; fi; \
	version=$$($$other -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	echo "other-python: Python $$version ($$other) in .venv-$$version"; \
	$(MAKE) --no-print-directory install PYTHON=$$other VENV=.venv-$$version && \
	.venv-$$version/bin/python -c "import companion, companion.cli, torch; print('other-python: imports', companion.__name__, 'with torch', torch.__version__)" && \
	.venv-$$version/bin/python -m pytest $(OTHER_TESTS) -q && \
	.venv-$$version/bin/python -m pytest -p no:cacheprovider --nbval --nbval-current-env \
	  --nbval-sanitize-with tests/sanitize.cfg $(OTHER_NBVAL) -q

# The wheel a reader installs beside their own torch (tools/wheel_check.py): build the sdist and the wheel, install
# the wheel into a fresh _build/wheel/venv with only its core dependencies, each at the floor pyproject.toml gives it
# (torch>=2.6 installs torch==2.6.0), check that no package of an extra came with it and that `companion` imports from
# there and not from this checkout, then run the code cells tagged `recipe` of RECIPES_NB (after its parameters) as
# one script from outside the checkout. uv installs (its cache makes a second run quick); pip where uv is missing.
RECIPES_NB ?= notebooks/11_your_own_model.ipynb
wheel-check: $(STAMP)
	@test -x $(UV) || $(MAKE) --no-print-directory $(UV) 2>&1 | grep -v '^WARNING: Location' || true
	$(BIN)/python tools/wheel_check.py --python $(PYTHON) --uv $(UV) --notebook $(RECIPES_NB) --out _build/wheel

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

# `make test`: every step in turn through tools/steps.py, which prints each step's minutes as it ends and a
# table of them all (also _build/steps.json; the README's cost table lists the same steps).
TEST_STEPS := install unit sources scoreboard-check reproduce nbval strict edition browser other-python wheel-check pdf-check
test:
	@MAKE="$(MAKE)" python3 tools/steps.py $(TEST_STEPS)

# The unit tests on every core (pytest-xdist; the live Slurm module stays on one worker, its cluster up once).
UNIT_WORKERS ?= auto
unit: $(STAMP)
	$(BIN)/python -m pytest tests --ignore=tests/browser -q -n $(UNIT_WORKERS) --dist loadgroup

# The inner loop for a change to the code, about 2 minutes on two cores: lint (ruff, pyproject.toml's rules),
# the unit tests but the `heavy` ones (tests/tiers.py: training, processes, daemons, books), nbval on Chapter 1.
# `make test` stays the whole proof.
check: $(STAMP)
	$(BIN)/ruff check companion tests tools benchmarks
	$(BIN)/python -m pytest tests --ignore=tests/browser -q -n $(UNIT_WORKERS) -m "not slow and not gpu and not heavy"
	$(BIN)/python -m pytest -p no:cacheprovider --nbval --nbval-current-env \
	  --nbval-sanitize-with tests/sanitize.cfg book/chapters/01_masks_and_positions.ipynb -q

sources: $(STAMP)
	$(BIN)/companion check-sources
	$(BIN)/python tools/tag_cells.py --check

scoreboard-check: $(STAMP)
	$(BIN)/companion scoreboard --check

# Retrain every run the chapters read, cold, into _build/reproduce/runs, and compare with the committed
# records: bitwise where this host computes like theirs, by verdict elsewhere (report in _build/reproduce/).
# REPRODUCE=sample (what .ci/run asks for, to fit CI's 90 minutes) retrains one training group of every
# experiment, drawn afresh for each commit, plus the groups of every record changed since the parent commit
# (companion/book/reproduce_sample.py); the whole proof stays the default here and in the book's workflow.
REPRODUCE ?= all
reproduce: $(STAMP)
	$(BIN)/companion reproduce $(if $(filter sample,$(REPRODUCE)),--sample,$(if $(filter all,$(REPRODUCE)),,$(error REPRODUCE must be all or sample, not $(REPRODUCE))))

# After a numerics change (a new companion.identity.NUMERICS) or a new preset: train the records the
# chapters lack into results/ci and remove those no chapter reads; then `make book` and commit both.
records: $(STAMP)
	$(BIN)/companion chapters --runs-only --prune --profile ci

# nbval re-executes the committed chapters, which read the committed records: a chapter per worker
# (pytest-xdist, --dist loadfile keeps each notebook's cells in order on one kernel).
nbval: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider --nbval --nbval-current-env -n $(UNIT_WORKERS) --dist loadfile \
	  --nbval-sanitize-with tests/sanitize.cfg book/chapters -q

strict: $(STAMP)
	$(BIN)/jupyter-book build . --all -W -n --keep-going
	@touch $(HTML)

browser: $(STAMP)
	$(BIN)/python -m pytest tests/browser -p no:cacheprovider -q -rs

clean:
	rm -rf _build

# The whole book as one PDF (companion/book/site/pdf.py): the single-page build with every fold open, printed by
# headless Chromium into _build/html/attention-priors-reproduced.pdf (the landing page links it), then checked:
# a complete PDF with a bookmark for every chapter's title. 1.3 minutes on two cores, of which the HTML build 0.3.
# COMPANION_PDF=1: the HTML built for it links the PDF (a plain `make book` links none: it has none).
pdf: export COMPANION_PDF := 1
pdf: $(HTML)
	$(BIN)/python -m companion.book.site.pdf

# `make test` prints and checks the PDF too (about one minute more); without Chromium it says so and skips.
pdf-check: $(HTML)
	$(BIN)/python -m companion.book.site.pdf --skip-without-chromium
