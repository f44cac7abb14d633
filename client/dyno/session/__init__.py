"""``dyno dynamic``'s conversation: the prompt (:mod:`.interactive`) and the words of the daemon's news
(:mod:`.lines`)."""
