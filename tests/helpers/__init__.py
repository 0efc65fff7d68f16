"""What the tests share, in one place (a test module imports from here, never from another test module:
tests/test_layers.py checks it):

    bench.py          make_bench: a Conversation and its Ports without a Session, on compact's floor
    scripted.py       the scripted model on the bench: replies routed by what a request is, its texts read back
    wire.py           what the tests on the fake API share: routes, replies, what a request body holds, a
                      5.5-family model at a small window (agent floor)
    histories.py      message histories built to order, and the stage cases the invariants run
    compaction.py     a conversation to compact on the bench: files read, a test run, a summary reply;
                      source files to read (make_files)
    notes.py          session notes on the bench: rounds of a given size, answers, notes updates
    thinking.py       preserved thinking on the bench: a 5.5-family bench and its steps
    clearing.py       the server's clearing on the bench: its bench, a reading step, what a request clears
    collapse.py       context collapse on the bench: turns, span summaries, placeholders
    session_parts.py  a session's hook runner, instruction files and system prompt put on a bench (agent floor)
    frontend.py       the REPL on a pipe input, the banner, slash commands on a session, the UI rendered
    client.py         a request as the SDK client is given one
    permissions.py    settings holding permission rules; a working day's commands and their rules
    tools.py          a tool context on a temporary directory
    memory.py         the agent's own records as a live list holds them, for the memory tests
    session.py        make_session: a real Session for agent/'s tests (the agent floor's builder)
    cli.py            the CLI's environment, run in this process or as a process; waiting; a process tree
                      killed as a crash would; the checkout (ROOT); the test API key (SECRET)
    transcripts.py    the sessions' transcripts under a home, and a file's records
    mcp.py            a --mcp-config file for tests/mcp_servers.py's servers
    tmux.py           the REPL in a real terminal: a pane of a private tmux server, typed into and read

What tests/compact/ uses imports nothing from agent/, nor the fake API (tests/test_layers.py).
"""
