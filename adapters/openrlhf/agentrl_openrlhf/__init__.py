"""agentrl-openrlhf: recipes, environments and verifiers of agentrl-plugins inside OpenRLHF 0.11.2."""

from agentrl_plugins.framework_versions import check_framework

OPENRLHF_VERSION = check_framework("agentrl-openrlhf", "openrlhf")
