"""``python -m bareagent_compact``."""

from bareagent_compact.cli import main

raise SystemExit(main())
