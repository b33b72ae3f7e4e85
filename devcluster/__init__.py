"""Real servers from Debian's packages for the tests and `make cluster`.

PostgreSQL, Redis and nginx, each started on 127.0.0.1 and a free port in a
temporary directory, as the package's own system user when run as root, and
stopped (the directory removed) afterwards. None of this is part of the
server loopwire ships; it is how the project runs the parts it relies on.
"""
