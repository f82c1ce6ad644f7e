"""The reference solution: a GPT-2-style model that trains end to end.

Lesson modules (one per chapter) implement the course's exercise API; `exercises/` is
generated from them with each marked body replaced by a stub. The rest (model, data, corpus,
vocabulary, training CLI) is provided code that students receive unchanged.
"""
