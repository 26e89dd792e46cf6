"""The suite's lanes (scripts/setup.sh test, tests/conftest.py): what a test run beside the parts may wait."""

# A test marked beside runs at the lowest priority: while the first part keeps both CPUs busy it may get a
# tenth of one for minutes, so its own waits are long ones (a hang still ends).
BESIDE_S = 900
