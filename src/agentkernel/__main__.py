"""`python -m agentkernel …`: the same as the `agentkernel` command, for when its script is not on PATH."""

from agentkernel.cli.main import main

if __name__ == "__main__":
    main()
