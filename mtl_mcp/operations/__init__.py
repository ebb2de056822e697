"""The operations layer: keeping an installation healthy.

doctor    health checks that say how to fix each problem
purge     making a leaked secret really gone from the data directory
context   the session-start context a hook injects
install   registering the server and hooks in clients' config files
"""
