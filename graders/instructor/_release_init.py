"""The lesson notebook's side of grading: ``from graders.instructor.notebook import check``."""
