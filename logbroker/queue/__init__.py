"""A queue: its pure core (queue_core), its shell over the logs (queue_shell), and their parts."""
