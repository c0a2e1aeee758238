"""The Agent family: the tool-call contract suite (collect) and its judgement from the saved
answers.
"""
