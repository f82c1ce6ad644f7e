"""Your package: fill in the stubs, lesson by lesson.

Every function that raises ``NotImplementedError`` is an exercise; its docstring says what to
compute. Grade your work with ``nox -s grade`` (or ``nox -s grade -- LESSON``). The other
modules (model, data, training CLI) are provided and call your functions, so
``python -m exercises.train`` trains a GPT on your own code.

This package was generated from the reference solution by tools/generate_exercises.py.
"""
