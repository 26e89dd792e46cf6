"""What the remote backends (cwsandbox, docker) share: the helper inside the sandbox (``helper``, ``call``),
the wire format of both sides (``wire``, ``sealed``), the controller's side (``desktop``, ``replies``) and
the zipapp that ships the helper (``zipapp``).

Nothing is imported here: a step's exec imports ``call`` alone, and the zipapp ships only the modules the
sandbox's side needs.
"""
