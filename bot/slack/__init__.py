"""The Slack edge: what comes in from Slack and the words and blocks that go out.

listeners/      every Bolt listener, thin: ack, read the payload, hand the work to a service
text.py         Slack's text format: what arrives as typed, what goes out escaped for mrkdwn
blocks.py       Block Kit for the wizard's messages (pure)
records.py      what the edge remembers: deliveries seen, question messages, approvals
poster.py       posting into a thread now (ephemeral notes, a run's status card)
attachments.py  files dropped into a thread, downloaded with the bot token
web_api.py      Slack's Web API over kept-alive connections
asgi.py         the bot's ASGI app: Bolt's HTTP endpoints, /healthz and /metrics
request_body.py request bodies read under a cap
"""
