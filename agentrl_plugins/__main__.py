from agentrl_plugins.cli import main

main()
