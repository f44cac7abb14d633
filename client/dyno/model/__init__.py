"""What ``dyno`` knows of a daemon's answers: its own frozen dataclasses, each the proto message of the
same name field by field (tests/test_client_model.py holds them to dynolog.proto). The gRPC edge
(:mod:`dyno.edge.rpc`) converts the messages into these by field name, and the legacy edge builds them
from a C++ daemon's JSON; commands, fan-out, output, ``respond`` and ``collect`` see nothing else.

A repeated field is a tuple, a map a dict, a message field with presence Optional (None: absent), and an
enum the vocabulary's member of the same name (None: the proto's ``*_UNSPECIFIED``). What a command
sends is its kind's request, the model its declaration makes (:mod:`msmonitor_contract.kinds`).

One module per concern (``daemon``, ``commands``, ``traces``, ``monitoring``, ``dynamic``), each
imported by what uses it: ``dyno status`` loads the daemon's few classes, not a trace's, a monitor's or
a session's (a dataclass costs about a millisecond to make).
"""
