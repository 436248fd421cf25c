"""`cronsource run`: the runtime in parts (scheduler loop, projection step, dispatch thread,
run watcher, supervisor, waker); see loop.py for the order of a turn."""
