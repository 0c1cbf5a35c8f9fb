"""`python -m extproc.tools.attack_training`."""

from extproc.tools.attack_training.cli import main

raise SystemExit(main())
