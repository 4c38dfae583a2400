"""Independent restatements of the spec's ranking, ordering and truncation rules.

Written from the seeds and contract notes, never from the server's code: a rule that the
server and the suite share by import would be checked against itself.
"""
