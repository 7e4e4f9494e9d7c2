"""`artbot chat`: the train-rl wizard in a terminal, an edge over the same engine as Slack.

Replies come from stdin one line at a time (typed or piped). A line starting with ``` opens a
block that the next ``` line closes: the block is one reply. `/file PATH` sends a local file.
The session is saved after every reply, so Ctrl-C, Ctrl-D or `/quit` lose nothing:
`artbot chat` again resumes at the open question.

`io` reads replies and prints turns; `chat` runs the conversation over the session store.
"""
