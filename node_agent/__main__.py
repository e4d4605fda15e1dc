"""`python -m node_agent` runs the agent."""

import sys

from node_agent.agent import main

sys.exit(main())
