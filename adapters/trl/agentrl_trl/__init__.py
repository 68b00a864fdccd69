"""agentrl-trl: recipes, environments and verifiers of agentrl-plugins inside TRL's GRPOTrainer."""
