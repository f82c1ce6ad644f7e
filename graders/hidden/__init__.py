"""Hidden graders: instructors only; never shipped to students."""
