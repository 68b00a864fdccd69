"""The BugFix gym: an agentic-RL environment plugin for agentrl-plugins."""
