"""agentrl-openrlhf: recipes, environments and verifiers of agentrl-plugins inside OpenRLHF 0.11.2."""
