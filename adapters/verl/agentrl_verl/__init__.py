"""agentrl-verl: environments, verifiers, estimators and corrections of agentrl-plugins inside verl."""

from agentrl_plugins.framework_versions import check_framework

VERL_VERSION = check_framework("agentrl-verl", "verl")
