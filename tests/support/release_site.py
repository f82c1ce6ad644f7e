"""The course site the tests' releases link to (``released_course`` passes it as --site-url)."""

RELEASED_SITE = "https://course.example.org/gpt/"
