"""What the tests share that is not a fixture: the stand-in grading harness, hostile and
by-hand submissions, the optional extras and system packages a test needs, a small site
build, and the instructor commands as the command line runs them."""
