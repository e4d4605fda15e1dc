"""`python -m node_agent.agent` runs the agent (the local cloud starts its nodes so)."""

import sys

from node_agent.agent.node import main

sys.exit(main())
