# Convenience targets; each one goes through scripts/setup.sh, which installs what is missing.
.PHONY: env demo test bench lint format
env:
	bash scripts/setup.sh env
demo:
	bash scripts/setup.sh demo
test:
	bash scripts/setup.sh test
bench:
	bash scripts/setup.sh bench
lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .
format:
	.venv/bin/ruff format . && .venv/bin/ruff check --fix .
