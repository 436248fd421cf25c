"""`python -m cronsource.adapters.entrypoints.cli`: the console script without the script."""

from cronsource.adapters.entrypoints.cli import main

main()
