"""Your package: fill in the stubs, lesson by lesson.

Every function that raises ``NotImplementedError`` is an exercise; its docstring says what to
compute. Grade your work with ``nox -s grade`` (or ``nox -s grade -- LESSON``) in the course's
repository; in a lesson folder of a class's release, with the lesson's notebook or
``python -m graders LESSON`` (``--watch`` re-grades on every save). Every module here is one
lesson and all of it is yours. The provided code (the GPT, data pipeline, training
and generation CLIs) is the ``gpt`` package beside this one, and it calls your functions when
asked to: ``nox -s train -- --lessons exercises`` trains a GPT on your own code.

This package was generated from the reference solution by tools/generate_exercises.py.
"""
