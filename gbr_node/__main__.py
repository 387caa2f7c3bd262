"""`python -m gbr_node` runs the same CLI as the `gbr-node` console script."""

from gbr_node.cli import main

raise SystemExit(main())
