"""`python -m golive` runs the command line."""

from golive.cli.main import main

raise SystemExit(main())
