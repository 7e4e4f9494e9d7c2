"""The wizard in Slack threads: started by `/train-rl`, advanced by its owner's replies and
clicks, finished with a script. One module per job:

command.py        `/train-rl`: a list, the runs, a comparison, help, or a new wizard
opening.py        a wizard's thread opened: the parent message and the first turn
replies.py        a reply in the thread: whose counts, each one handled once
turns.py          a turn advanced (the assistant first) and saved with what it says
proposals.py      the assistant's proposals: accept, re-answer, a draft's edit or another draft
drafts.py         the assistant's drafts as messages and effects
result_buttons.py the finished wizard's script generated, and the buttons under it
script_results.py the script rendered, checked, uploaded and dry-run
expiry.py         wizards ending unfinished: idle ones, and those of a workspace the app left
home.py           the App Home tab
keyed_locks.py    one lock per thread
"""
