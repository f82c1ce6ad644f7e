"""The reference solution: one module per lesson, implementing the course's exercise API.

``exercises/`` is generated from these modules (tools/generate_exercises.py) with each body
between solution markers replaced by a stub. The provided code that runs them (the GPT, data,
training and generation CLIs) is the ``gpt`` package: ``python -m gpt.train`` trains with
these lessons, ``python -m gpt.train --lessons exercises`` with the student's.
"""
