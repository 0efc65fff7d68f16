"""What the tests share, in one place (a test module imports from here, never from another test module):

bench.py       make_bench: a Conversation and its Ports without a Session, for compact/'s tests
histories.py   message histories built to order, and the stage cases the invariants run
"""
