# The two commands of the README:
#   make demo   - set up and check the bundled example programs
#   make test   - set up everything, lint, type-check and run every test (what CI runs)
.PHONY: demo test lint pytest client bench

demo:
	@bash scripts/bootstrap.sh demo
	.venv/bin/gradguard check examples/ ; test $$? -le 1

test:
	@bash scripts/bootstrap.sh test
	$(MAKE) lint
	$(MAKE) pytest
	$(MAKE) client

# ruff (configured in pyproject.toml: pyflakes, pycodestyle errors, bugbear,
# a complexity cap) and mypy on the package; also run by .pre-commit-config.yaml
lint:
	.venv/bin/ruff check .
	.venv/bin/mypy

pytest:
	OMP_NUM_THREADS=1 .venv/bin/python -m pytest -q

client:
	@if [ -f client-vscode/scripts/ci.sh ]; then bash client-vscode/scripts/ci.sh; fi

bench:
	@bash scripts/bootstrap.sh test
	.venv/bin/python -m pip install -q -e '.[bench]' torch==2.13.0
	OMP_NUM_THREADS=1 .venv/bin/python -m bench
