"""The base every other folder imports: standard library only, runs anywhere, ships to students."""
