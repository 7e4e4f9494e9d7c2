"""The Slack bot: the edge to Slack (bot/slack), the delivery of what a turn must say
(bot/delivery), the process around it (bot/process), the wizard in threads (bot/wizard), runs on
the runner (bot/runs) and the workspaces that installed it (bot/workspaces)."""
