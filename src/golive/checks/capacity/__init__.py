"""The capacity family: the four pressure phases (collect) and their judgement from the bundle."""
