"""The command line: parse flags, load config, one `asyncio.run`, show progress and the verdict,
map the outcome to an exit code; the demo.
"""
