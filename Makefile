# The two commands of the README:
#   make demo   - set up and check the bundled example programs
#   make test   - set up everything and run every test (what CI runs)
.PHONY: demo test pytest client bench

demo:
	@bash scripts/bootstrap.sh demo
	.venv/bin/gradguard check examples/ ; test $$? -le 1

test: 
	@bash scripts/bootstrap.sh test
	$(MAKE) pytest
	$(MAKE) client

pytest:
	OMP_NUM_THREADS=1 .venv/bin/python -m pytest -q

client:
	@if [ -f client-vscode/scripts/ci.sh ]; then bash client-vscode/scripts/ci.sh; fi

bench:
	@bash scripts/bootstrap.sh test
	.venv/bin/python -m pip install -q -e '.[bench]' torch==2.13.0
	OMP_NUM_THREADS=1 .venv/bin/python -m bench
