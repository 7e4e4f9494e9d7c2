"""Which workspaces the bot serves, and with which token.

installations.py the workspaces, OAuth's installation and state stores, the clients per team
token_keys.py    Slack tokens encrypted at rest
"""
