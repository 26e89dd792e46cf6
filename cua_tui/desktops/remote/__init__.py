"""What the remote backends (cwsandbox, docker) share: the helper that runs inside the sandbox, the
controller's side of it, and the zipapp that ships it.

- ``helper.py``: the resident helper, the project's local desktop inside the sandbox.
- ``call.py``: what one exec runs inside the sandbox (the standard library only).
- ``wire.py``: the requests' actions and the replies' format, the same on both sides.
- ``sealed.py``: typed text sealed for its trip in a command line.
- ``desktop.py``: ``HelperDesktop``, the controller's desktop that drives the helper.
- ``replies.py``: the controller's checks of what comes back (untrusted).
- ``zipapp.py``: the helper's zipapp.

Nothing is imported here: a step's exec imports ``call`` alone, and the zipapp ships only the modules the
sandbox's side needs.
"""
