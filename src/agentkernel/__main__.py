"""`python -m agentkernel …`: the same as the `agentkernel` command, for when its script is not on PATH
(its exit status too)."""

from agentkernel.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
