"""agentrl-verl: environments, verifiers, estimators and corrections of agentrl-plugins inside verl."""
