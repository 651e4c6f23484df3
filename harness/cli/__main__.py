"""`python -m harness.cli`: the same entry point as the `harness` console script."""

from harness.cli.main import main

main()
