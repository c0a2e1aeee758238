"""`python -m golive` runs the command line."""

from golive.cli import main

raise SystemExit(main())
