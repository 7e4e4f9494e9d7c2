"""The wizard in Slack threads: starting it, advancing it by replies and clicks, finishing it
with a script.

service.py        WizardService
drafts.py         the assistant's drafts: offered as code with Use it / Edit / Draft again
script_results.py the finished wizard's script: rendered, checked, uploaded, dry-run
home.py           the App Home tab
keyed_locks.py    one lock per conversation
"""
