"""`python -m verigap` is the same as the `verigap` command."""

from verigap.cli import main

main()
