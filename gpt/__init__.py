"""The provided code of the course: the GPT, its data pipeline, the training and generation CLIs.

Nothing here is an exercise. Wherever this code needs a lesson's function (an embedding
lookup, a mask, the learning-rate schedule, a training step, sampling, ...) it calls the one
of a lesson package passed in as ``lessons`` (see ``gpt.lessons``): the reference
``solutions`` or the student's ``exercises``. So one command trains either:

    python -m gpt.train                       # the reference lessons (solutions/)
    python -m gpt.train --lessons exercises   # your own

Importing ``gpt`` imports nothing else; import the modules you need (``gpt.model``, ...).
"""
