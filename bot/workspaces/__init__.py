"""Which workspaces the bot serves, and with which token.

store.py         the workspaces served (`artbot_workspaces`): enterprise, and whether the app left
installations.py slack_sdk's installation and OAuth state stores on the bot's database
clients.py       the Web API client that acts in a team (`SlackClients.client_for`)
token_keys.py    Slack tokens encrypted at rest: the keys, the cipher, the column type
"""
