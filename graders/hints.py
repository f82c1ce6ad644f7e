"""The harness's own hints: failures it diagnoses whatever the check (standard library only)."""

NOT_IMPLEMENTED = "not implemented yet: the function still raises NotImplementedError"
NOT_PLAIN = (
    "return plain data, as the contract says: a torch.Tensor, a Python number, str, or lists, "
    "tuples and dicts of them"
)
IN_PLACE = (
    "the function changed its input in place: no function may modify its arguments, "
    "so compute a new tensor (or a new dict) instead"
)
EXITED = "the code called sys.exit(): return the result instead of ending the program"
OUT_OF_MEMORY = "ran out of memory: the grader allows {gib:g} GiB for your code"
TIMED_OUT = "took longer than {seconds:g} s: an endless loop, or far too much work?"
CRASHED = "the process running your code died during the call ({how})"
TOO_MUCH_OUTPUT = "printed more than {mib:g} MiB during one call: remove the prints"
ERROR_PATH = (
    "this error check counts once {function} computes its values: fix its other checks first"
)
