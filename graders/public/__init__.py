"""Public graders: they ship to students with the exercises."""
