"""``dyno dynamic``'s conversation: one session per attached client, holding its processes."""
