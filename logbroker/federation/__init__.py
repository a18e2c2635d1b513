"""Federation: exchanges (and, next, queues) that take messages from upstream brokers."""
