"""`python -m gbr_node` runs the same CLI as the `gbr-node` console script."""

from gbr_node.cli import main

if __name__ == "__main__":  # not when a spawned worker process imports it (library index)
    raise SystemExit(main())
