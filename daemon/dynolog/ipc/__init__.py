"""The process side: the datagram sockets the job processes speak on (:mod:`.endpoint`), the dispatch of
what they send (:mod:`.dispatch`) to the adapter of their kind of client (:mod:`.clients`), and the
pidfd watch that forgets a process when it ends (:mod:`.pidwatch`)."""
