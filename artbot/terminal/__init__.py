"""`artbot chat`: the train-rl wizard in a terminal, an edge over the same engine as Slack.

Replies come from stdin (typed or piped): a line, or the lines that make one answer with it (a
paste, or data and code without fences: answer_lines.py). A line starting with ``` opens a block
that the next ``` line closes: the block is one reply. `/file PATH` sends a local file. The
wizard's messages are written in Slack's markup; markup.py shows them in a terminal.
The session is saved after every reply, so Ctrl-C, Ctrl-D or `/quit` lose nothing:
`artbot chat` again resumes at the open question.

`io` reads replies and prints turns; `chat` runs the conversation over the session store.
"""
