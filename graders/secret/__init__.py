"""The checker's secret half: implementations of exercises (oracles, trusted dependencies).

Instructors only: the student release never ships this folder (nor graders/hidden/), so
everything that implements an exercise lives here and nowhere else in graders/.
"""
