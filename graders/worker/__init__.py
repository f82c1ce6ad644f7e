"""The grading worker: the one process that runs the student's code.

The checker (pytest, in another process) sends requests as plain data; the worker imports the
student's package, calls one function (or runs a small *scenario* around it, such as "build a
toy model, run the student's train_step, return the new parameters"), and answers with plain
data. Both directions are pickles that name no class or function (see ``plain`` and
``encode``): the worker copies an answer to exactly the plain types before it packs it, so no
code of the student's runs while it is packed, and nothing it sends can run code in the
checker.

Nothing trusted lives here: no expected value, no reference implementation, no rule's
verdict. A function that builds on others of its module gets *proxies* for them, which ask the
checker (see make_proxies); the checker judges every answer in its own process, and what it
decides rests on what it observes itself: the answer's plain data, the tensors of a call's
inputs read back from memory it shares (graders/shared.py), its own clock.

The package runs standalone. ``graders.launch`` starts ``python -I -c BOOTSTRAP --target DIR
...`` with a Unix socket as standard input and sends the package's sources there as one
bundle; the process then forks a fresh lesson process, with a socket of its own, for
every lesson (``serving.serve_lessons``), so the worker needs no file of the grader tree (a
sandbox shows it none) and imports only the standard library, torch and regex. Once loaded,
the worker's modules are in no ``sys.modules`` entry, and the lesson process takes what it runs
before the student's package is imported. The checker imports three of its modules, for what
both sides share: ``framing`` (the frames, torch-free), ``protocol`` (plain data, the markers)
and ``scenarios`` (the toy model and the scenarios); ``limits`` is the one table of the
limits. It holds no solution of any exercise: it ships to students.

    framing.py    the frames: a length, then the payload                 (checker and worker)
    protocol.py   plain data and the markers                             (checker and worker)
    scenarios.py  the toy model and the scenarios                        (checker and worker)
    limits.py     the limits on the student's processes                  (checker and worker)
    proxies.py    the stand-ins for the dependencies the checker answers (worker)
    absent.py     the tokenizer libraries the lesson process goes without (worker)
    tracing.py    a by-hand function's call as an operator graph         (worker)
    hardening.py  resource limits, lost privileges, the seccomp filter   (worker)
    serving.py    the forking worker and the lesson process's requests   (worker)

Requests (a dict each):
    {"op": "import", "module": "embeddings"}
    {"op": "call", "function": "embeddings.lookup", "args": [...], "kwargs": {...},
     "shared": [[offset, dtype, shape, requires_grad], ...], "proxies": [...],
     "trace": bool}
    {"op": "scenario", "name": "train_step", "function": "training.train_step", "config": {...}}
    {"op": "limits"}
A call's tensors are ``{SHARED: slot}`` in its arguments: the slot's tensor is mapped from the
file the checker sends with the request's first byte. Answers: {"ok": True, "value": PACKED,
"inputs": PACKED} (a traced call adds "graph": PACKED, with its value's skeleton as "value")
or {"ok": False, "error": {...}} ("inputs": the call's inputs after it, as the lesson process
saw them), where PACKED is {"type": name, "payload": bytes or None,
"error": why not}: the value is packed apart so that an answer that is not plain data still
arrives as a readable failure. While a request runs, a proxy may send {"ask": NAME,
"question": ...}; the checker replies {"ok": True, "value": ...} or {"ok": False, "error": why}
before the request's answer comes. Anything else the lesson process writes fails the call.
"""
